#include "common/hooks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/errors.h"
#include "test_model.h"

namespace mjfast::hooks {
namespace {

// An env as the trampolines see it: counts what reaches it.
struct CountingTarget : HookTarget {
  void on_control(const mjModel*, mjData*) override { ++control; }
  void on_passive(const mjModel*, mjData*) override { ++passive; }
  std::atomic<int> control{0};
  std::atomic<int> passive{0};
};

class HooksTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const mjData* d : registered_) unregister_pair(d);
    mjcb_control = nullptr;
    mjcb_passive = nullptr;
  }

  void register_for_test(const mjModel* m, mjData* d, const std::shared_ptr<HookTarget>& target) {
    register_pair(m, d, target);
    registered_.push_back(d);
  }

  test_models::ModelPtr model = test_models::compile();
  test_models::ModelPtr other_model = test_models::compile();
  test_models::DataPtr data = test_models::make_data(model.get());
  test_models::DataPtr other_data = test_models::make_data(model.get());
  std::shared_ptr<CountingTarget> env = std::make_shared<CountingTarget>();

 private:
  std::vector<const mjData*> registered_;
};

TEST_F(HooksTest, ARegisteredPairReachesItsEnvAndNothingElseDoes) {
  register_for_test(model.get(), data.get(), env);
  control_trampoline(model.get(), data.get());
  passive_trampoline(model.get(), data.get());
  passive_trampoline(model.get(), data.get());
  EXPECT_EQ(env->control, 1);
  EXPECT_EQ(env->passive, 2);
  // Another data, or the env's data with another model, is not the env's pair.
  control_trampoline(model.get(), other_data.get());
  control_trampoline(other_model.get(), data.get());
  EXPECT_EQ(env->control, 1);
}

TEST_F(HooksTest, MujocoCallsTheInstalledTrampolinesFromItsStep) {
  register_for_test(model.get(), data.get(), env);
  mjcb_control = &control_trampoline;
  mjcb_passive = &passive_trampoline;
  mj_step(model.get(), data.get());
  EXPECT_GE(env->control, 1);
  EXPECT_GE(env->passive, 1);
  mj_step(model.get(), other_data.get());  // a pair of no env: dispatches nothing
  const int after_own = env->control;
  mj_step(model.get(), other_data.get());
  EXPECT_EQ(env->control, after_own);
}

TEST_F(HooksTest, AnUnregisteredPairOrAGoneEnvIsNotCalled) {
  register_for_test(model.get(), data.get(), env);
  auto gone = std::make_shared<CountingTarget>();
  register_for_test(model.get(), other_data.get(), gone);
  std::weak_ptr<CountingTarget> watch = gone;
  gone.reset();  // the registry holds it weakly
  EXPECT_TRUE(watch.expired());
  control_trampoline(model.get(), other_data.get());  // nothing to call, and no crash

  unregister_pair(data.get());
  control_trampoline(model.get(), data.get());
  EXPECT_EQ(env->control, 0);
  // Registering again (a reload) replaces the entry instead of adding a second one.
  register_for_test(model.get(), data.get(), env);
  register_for_test(model.get(), data.get(), env);
  control_trampoline(model.get(), data.get());
  EXPECT_EQ(env->control, 1);
}

TEST_F(HooksTest, TheSteppingThreadResolvesItsPairWithoutTheRegistry) {
  {
    const SteppingScope stepping(model.get(), data.get(), env.get());
    control_trampoline(model.get(), data.get());
    EXPECT_EQ(env->control, 1);
    std::thread other([&] { control_trampoline(model.get(), data.get()); });
    other.join();
    EXPECT_EQ(env->control, 1);  // another thread looks in the registry, where it is not
  }
  control_trampoline(model.get(), data.get());
  EXPECT_EQ(env->control, 1);  // the scope is gone
}

TEST_F(HooksTest, ADispatchScopeSilencesItsOwnEnvOnlyAndNests) {
  auto second = std::make_shared<CountingTarget>();
  register_for_test(model.get(), data.get(), env);
  register_for_test(model.get(), other_data.get(), second);
  EXPECT_FALSE(in_dispatch());
  {
    const DispatchScope dispatching(env.get());
    EXPECT_TRUE(in_dispatch_of(env.get()));
    EXPECT_FALSE(in_dispatch_of(second.get()));
    control_trampoline(model.get(), data.get());        // a plugin's mj_forward on its data
    control_trampoline(model.get(), other_data.get());  // a plugin stepping another env
    EXPECT_EQ(env->control, 0);
    EXPECT_EQ(second->control, 1);
    {
      const DispatchScope callback_free;  // null: every env
      EXPECT_EQ(dispatch_depth(), 2);
      EXPECT_TRUE(in_dispatch_of(second.get()));
      control_trampoline(model.get(), other_data.get());
      EXPECT_EQ(second->control, 1);
    }
    EXPECT_EQ(dispatch_depth(), 1);
    EXPECT_FALSE(in_dispatch_of(second.get()));
  }
  EXPECT_FALSE(in_dispatch());
  EXPECT_FALSE(in_plugin_callback());
  {
    const LifecycleScope loading;
    EXPECT_TRUE(in_plugin_callback());
    EXPECT_FALSE(in_dispatch());  // lifecycle code leaves the trampolines alone
    control_trampoline(model.get(), data.get());
    EXPECT_EQ(env->control, 1);
  }
  EXPECT_FALSE(in_plugin_callback());
}

TEST_F(HooksTest, OwnershipNamesTheHookThatWasReplaced) {
  mjcb_control = &control_trampoline;
  mjcb_passive = &passive_trampoline;
  EXPECT_NO_THROW(check_owned());
  mjcb_passive = [](const mjModel*, mjData*) {};
  EXPECT_TRUE(control_owned());
  EXPECT_FALSE(passive_owned());
  try {
    check_owned();
    ADD_FAILURE() << "a replaced mjcb_passive went unnoticed";
  } catch (const HookOwnershipError& error) {
    EXPECT_NE(std::string(error.what()).find("mjcb_passive"), std::string::npos) << error.what();
  }
  mjcb_control = nullptr;
  EXPECT_THROW(check_owned(), HookOwnershipError);
}

// Readers scan the registry without a lock while writers replace it (envs made and closed on
// other threads): every call for a live pair reaches its env, none is lost or torn.
TEST_F(HooksTest, LookupsRacingRegistrationsAlwaysFindALivePair) {
  register_for_test(model.get(), data.get(), env);
  constexpr int kReaders = 3;
  constexpr int kCallsEach = 20000;
  std::atomic<bool> done{false};
  std::vector<test_models::DataPtr> churn;
  for (int i = 0; i < 4; ++i) churn.push_back(test_models::make_data(model.get()));
  auto churn_target = std::make_shared<CountingTarget>();
  std::thread writer([&] {
    while (!done.load()) {
      for (auto& d : churn) register_pair(model.get(), d.get(), churn_target);
      for (auto& d : churn) unregister_pair(d.get());
    }
  });
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      for (int i = 0; i < kCallsEach; ++i) control_trampoline(model.get(), data.get());
    });
  }
  for (std::thread& reader : readers) reader.join();
  done.store(true);
  writer.join();
  EXPECT_EQ(env->control, kReaders * kCallsEach);
}

}  // namespace
}  // namespace mjfast::hooks
