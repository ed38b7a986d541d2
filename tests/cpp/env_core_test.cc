#include "env/env_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/hooks.h"
#include "test_model.h"

namespace mjfast {
namespace {

// What a plugin does in its step callbacks, set by each test.
struct PluginScript {
  int fail_last_stage_at = 0;            // the last_stage call (1-based) that throws; 0: none
  EnvCore* step_from_control = nullptr;  // steps this env from its control callback
};

struct PluginCalls {
  std::atomic<int> pre_step{0};
  std::atomic<int> control{0};
  std::atomic<int> last_stage{0};
  std::string refusal;  // what step_from_control was refused with
};

class CountingPlugin : public IPluginAdapter {
 public:
  CountingPlugin(const PluginScript& script, PluginCalls& calls) : script_(script), calls_(calls) {}

  bool load(const mjModel*, mjData*) override { return true; }
  CallbackMask callbacks() override {
    return mask_of(Callback::kPreStep) | mask_of(Callback::kControl) |
           mask_of(Callback::kLastStage);
  }
  void pre_step(const mjModel*, mjData*) override { ++calls_.pre_step; }
  void control(const mjModel*, mjData* d) override {
    ++calls_.control;
    d->ctrl[0] = 0.5;
    if (script_.step_from_control != nullptr) {
      try {
        script_.step_from_control->step(1);
      } catch (const std::logic_error& refused) {
        calls_.refusal = refused.what();
      }
    }
  }
  void last_stage(const mjModel*, mjData*) override {
    if (++calls_.last_stage == script_.fail_last_stage_at) {
      throw std::runtime_error("last_stage exploded");
    }
  }

 private:
  PluginScript script_;
  PluginCalls& calls_;
};

// An EnvCore bound to the hinge model with MuJoCo's hooks pointing at the trampolines, as
// mjfast.install_hooks() leaves them.
class EnvCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mjcb_control = &hooks::control_trampoline;
    mjcb_passive = &hooks::passive_trampoline;
    env->bind(model.get(), data.get(), scratch.get(), nullptr);
  }
  void TearDown() override {
    env->close();
    mjcb_control = nullptr;
    mjcb_passive = nullptr;
  }

  // One plugin of `script`, loaded as the env's next generation.
  void load_plugin(const PluginScript& script) {
    env->host().set_factory([this, script](ModelGeneration, PluginGeneration) {
      std::vector<FactoryEntry> entries(1);
      entries[0].name = "counter";
      entries[0].type = "test/Counting";
      entries[0].adapter = std::make_unique<CountingPlugin>(script, calls);
      return entries;
    });
    env->load_next_plugin_generation();
  }

  test_models::ModelPtr model = test_models::compile();
  test_models::DataPtr data = test_models::make_data(model.get());
  test_models::DataPtr scratch = test_models::make_data(model.get());
  std::shared_ptr<EnvCore> env = std::make_shared<EnvCore>();
  PluginCalls calls;
};

TEST_F(EnvCoreTest, StepsTheBoundDataAndCountsTheSteps) {
  env->step(10);
  EXPECT_EQ(env->step_count(), 10u);
  EXPECT_NEAR(data->time, 10 * model->opt.timestep, 1e-12);
  const EnvStatistics stats = env->statistics();
  EXPECT_EQ(stats.steps, 10u);
  EXPECT_NEAR(stats.simulated_s, 10 * model->opt.timestep, 1e-12);
  EXPECT_FALSE(stats.running);
  EXPECT_THROW(env->step(-1), std::invalid_argument);
}

TEST_F(EnvCoreTest, DispatchesEachPluginCallbackOncePerStep) {
  load_plugin({});
  env->step(7);
  EXPECT_EQ(calls.pre_step.load(), 7);
  EXPECT_EQ(calls.control.load(), 7);
  EXPECT_EQ(calls.last_stage.load(), 7);
  EXPECT_DOUBLE_EQ(data->ctrl[0], 0.5);  // the control callback's write reached MuJoCo's data
  EXPECT_NE(data->qvel[0], 0.0);
}

TEST_F(EnvCoreTest, APluginErrorEndsTheStepCallAndFailsOnlyThatPlugin) {
  PluginScript script;
  script.fail_last_stage_at = 3;
  load_plugin(script);
  try {
    env->step(10);
    FAIL() << "step() did not raise the plugin's error";
  } catch (const PluginDispatchError& error) {
    EXPECT_NE(std::string(error.what()).find("last_stage exploded"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(env->step_count(), 3u);  // stopped after the step in which it raised
  const std::vector<PluginReport> report = env->host().report();
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].state, PluginState::kFailed);
  env->step(2);  // the env steps on without it
  EXPECT_EQ(env->step_count(), 5u);
  EXPECT_EQ(calls.last_stage.load(), 3);
}

TEST_F(EnvCoreTest, RefusesToBeSteppedFromItsOwnPluginCallback) {
  PluginScript script;
  script.step_from_control = env.get();
  load_plugin(script);
  env->step(1);
  EXPECT_NE(calls.refusal.find("step()"), std::string::npos) << calls.refusal;
  EXPECT_EQ(env->step_count(), 1u);
}

TEST_F(EnvCoreTest, ThePhysicsThreadRunsExactlyItsStepBudget) {
  load_plugin({});
  env->start(std::nullopt, 25);
  EXPECT_TRUE(env->wait(30.0));
  EXPECT_FALSE(env->running());
  EXPECT_EQ(env->step_count(), 25u);
  EXPECT_EQ(calls.control.load(), 25);
  EXPECT_EQ(env->statistics().steps, 25u);
  env->stop();  // joins the ended thread; nothing to raise
  EXPECT_THROW(env->start(-1.0), std::invalid_argument);  // not a real-time factor
}

TEST_F(EnvCoreTest, StepCallsAreRefusedWhileThePhysicsThreadRunsUnlessPaused) {
  env->start(std::nullopt);
  EXPECT_THROW(env->step(1), std::logic_error);
  env->pause_stepping();
  const std::uint64_t paused_at = env->step_count();
  env->step(3);  // the user's pause lets the caller step
  EXPECT_EQ(env->step_count(), paused_at + 3);
  env->stop();
  EXPECT_FALSE(env->running());
  EXPECT_FALSE(env->stepping_paused());  // stop() clears the pause
  EXPECT_TRUE(env->wait(0.0));
}

TEST_F(EnvCoreTest, SetStateReturnsToAStateTakenEarlier) {
  env->step(5);
  std::vector<double> saved(static_cast<std::size_t>(env->state_size()));
  EnvCore::StateHeader header;
  ASSERT_TRUE(env->get_state(saved.data(), saved.size(), header, nullptr));
  EXPECT_EQ(header.step_count, 5u);
  const double time = data->time;
  const double qpos = data->qpos[0];
  data->ctrl[0] = 1.0;
  env->step(20);
  ASSERT_NE(data->qpos[0], qpos);
  env->set_state(saved.data(), saved.size(), header.step_count, header.model->signature,
                 header.model->description, {});
  EXPECT_EQ(env->step_count(), 5u);
  EXPECT_DOUBLE_EQ(data->time, time);
  EXPECT_DOUBLE_EQ(data->qpos[0], qpos);
  // Another model's state is refused, naming both.
  EXPECT_THROW(env->set_state(saved.data(), saved.size(), 0, "another", "another model", {}),
               std::invalid_argument);
  // A buffer of the wrong size changes nothing.
  EXPECT_FALSE(env->get_state(saved.data(), saved.size() + 1, header, nullptr));
}

TEST_F(EnvCoreTest, AResetReturnsTheWorldToItsStartAndZeroesTheStepCount) {
  data->ctrl[0] = 1.0;
  env->step(10);
  env->hold_steps();
  EnvCore::ResetTarget target;
  target.qpos = {0.25};
  env->reset_world(target);
  env->release_steps();
  EXPECT_EQ(env->step_count(), 0u);
  EXPECT_EQ(data->time, 0.0);
  EXPECT_DOUBLE_EQ(data->qpos[0], 0.25);
  EXPECT_EQ(data->qvel[0], 0.0);
  target.qpos = {0.0, 0.0};  // nq is 1
  env->hold_steps();
  EXPECT_THROW(env->reset_world(target), std::invalid_argument);
  env->release_steps();
}

TEST_F(EnvCoreTest, AClosedEnvRefusesToStep) {
  env->close();
  EXPECT_THROW(env->step(1), std::logic_error);
  EXPECT_THROW(env->start(std::nullopt), std::logic_error);
  env->close();  // twice is fine
}

TEST_F(EnvCoreTest, StepRefusesWhenMuJoCosHooksAreNotTheTrampolines) {
  mjcb_control = nullptr;
  EXPECT_THROW(env->step(1), HookOwnershipError);
  EXPECT_EQ(env->step_count(), 0u);
}

}  // namespace
}  // namespace mjfast
