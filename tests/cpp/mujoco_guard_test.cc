#include "common/mujoco_guard.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/hooks.h"
#include "test_model.h"

// MuJoCo's thread-local log handler (what the guard installs), to see what it leaves behind.
extern "C" {
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
}

namespace mjfast::mujoco_guard {
namespace {

std::vector<std::string> logged;  // what reached the test's own handler
void test_handler(const mjLogMessage* message) { logged.emplace_back(message->subject); }

void control_raises(const mjModel*, mjData*) { mju_error("controller exploded at %d", 7); }

// A plugin's frames between MuJoCo and the guard (the host's dispatch, which catches what its
// plugins raise): what MuJoCo raises there must unwind through them, not jump over them.
std::string caught_in_plugin;
void control_raises_in_dispatch(const mjModel*, mjData*) {
  const hooks::DispatchScope dispatching;
  try {
    mju_error("plugin exploded");
  } catch (const MujocoCallError& e) {
    caught_in_plugin = e.what();
  }
}

class MujocoGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    logged.clear();
    previous_ = _mjPRIVATE_setTlsLogHandler(&test_handler);
  }
  void TearDown() override {
    mjcb_control = nullptr;
    _mjPRIVATE_setTlsLogHandler(previous_);
  }

  test_models::ModelPtr model = test_models::compile();
  test_models::DataPtr data = test_models::make_data(model.get());

 private:
  mjfLogHandler previous_ = nullptr;
};

TEST_F(MujocoGuardTest, AnErrorInsideAGuardedStepIsReportedAndTheProcessLives) {
  {
    const Scope guard;  // as EnvCore's stepping loop holds one
    std::string error;
    EXPECT_TRUE(step(model.get(), data.get(), error));
    EXPECT_EQ(error, "");
    mjcb_control = &control_raises;
    EXPECT_FALSE(step(model.get(), data.get(), error));
    EXPECT_NE(error.find("controller exploded at 7"), std::string::npos) << error;
    EXPECT_TRUE(guard.caught_error());
    mjcb_control = nullptr;
    mj_resetData(model.get(), data.get());
    error.clear();
    EXPECT_TRUE(step(model.get(), data.get(), error));
    EXPECT_EQ(data->time, model->opt.timestep);
  }
  // The guard is gone with its scope: the thread's handler is the one it found.
  EXPECT_EQ(_mjPRIVATE_setTlsLogHandler(&test_handler), &test_handler);
  EXPECT_TRUE(logged.empty());  // the error went to the guard alone
}

TEST_F(MujocoGuardTest, AnErrorBelowAPluginFrameIsThrownThroughItInstead) {
  mjcb_control = &control_raises_in_dispatch;
  caught_in_plugin.clear();
  const Scope guard;
  std::string error;
  EXPECT_TRUE(step(model.get(), data.get(), error));  // the plugin's failure, not the step's
  EXPECT_EQ(caught_in_plugin, "MuJoCo error: plugin exploded");
  EXPECT_FALSE(hooks::in_dispatch());  // the plugin's scope was unwound, not jumped over
  EXPECT_EQ(data->time, model->opt.timestep);
}

TEST_F(MujocoGuardTest, AnErrorOutsideAStepIsThrownAndCountedByItsScope) {
  const Scope outer;
  EXPECT_FALSE(outer.caught_error());
  {
    const Scope nested;  // nested scopes keep the outermost one's handler to pass warnings to
    EXPECT_THROW(mju_error("no step here"), MujocoCallError);
    EXPECT_TRUE(nested.caught_error());
  }
  EXPECT_TRUE(outer.caught_error());
}

// (Where a warning inside a Scope goes is not asserted: MuJoCo 4.0's mju_message drops a message
// dispatched from inside a log handler, so the guard's hand-over to the handler it replaced
// reaches nobody.)
TEST_F(MujocoGuardTest, AWarningIsNoErrorAndAReplacedHandlerComesBack) {
  {
    const Scope guard;
    mju_warning("just a warning");
    EXPECT_FALSE(guard.caught_error());
    // Someone (a Python plugin calling mujoco's bindings) replaced the thread's handler.
    _mjPRIVATE_setTlsLogHandler(&test_handler);
    reinstall();
    EXPECT_THROW(mju_error("caught again"), MujocoCallError);
    EXPECT_TRUE(guard.caught_error());
  }
  EXPECT_TRUE(logged.empty());
  EXPECT_EQ(_mjPRIVATE_setTlsLogHandler(&test_handler), &test_handler);
  reinstall();  // no scope: leaves the handler alone
  EXPECT_EQ(_mjPRIVATE_setTlsLogHandler(&test_handler), &test_handler);
}

}  // namespace
}  // namespace mjfast::mujoco_guard
