// JointTrajectoryCore on a real model: what it commands per interface, the goal's outcomes by its
// tolerances, the hold, and the events its bookkeeping waits for.
#include "control/joint_trajectory_core.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "control/gripper_core.h"
#include "test_model.h"

namespace mjfast {
namespace {

// One slide joint without gravity, driven by a position servo (actuator 0) and a motor (1).
constexpr const char* kSlideXml = R"(
<mujoco>
  <option gravity="0 0 0" timestep="0.001"/>
  <worldbody>
    <body name="slider">
      <joint name="slide" type="slide" axis="1 0 0" damping="1"/>
      <geom type="box" size="0.05 0.05 0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="slide" kp="400" kv="40"/>
    <motor name="motor" joint="slide"/>
  </actuator>
</mujoco>)";

constexpr double kNow = std::numeric_limits<double>::quiet_NaN();

struct Rig {
  test_models::ModelPtr model = test_models::compile(kSlideXml);
  test_models::DataPtr data = test_models::make_data(model.get());
  std::unique_ptr<JointTrajectoryCore> core;

  explicit Rig(CommandInterface command = CommandInterface::kPosition, PidGains gains = {}) {
    JointTrajectoryLayout layout;
    layout.qpos = {0};
    layout.dof = {0};
    layout.command = command;
    layout.actuator = {command == CommandInterface::kEffort ? 1 : 0};
    layout.gains = {gains};
    layout.ff_velocity_scale = {0.0};
    layout.state_period = 0.01;
    layout.feedback_period = 0.05;
    core = std::make_unique<JointTrajectoryCore>(layout);
    // The host would call it from mjcb_control; here by hand before each step.
  }
  void step(int n = 1) {
    for (int i = 0; i < n; ++i) {
      core->control(model.get(), data.get());
      mj_step(model.get(), data.get());
    }
  }
  GoalOutcome run_until_end(double limit_s) {
    while (data->time < limit_s) {
      step();
      const GoalEnd end = core->last_end();
      if (end.goal != 0) return end.outcome;
    }
    return GoalOutcome::kActive;
  }
};

std::vector<JointTolerance> tolerance(double position, double velocity = 0.0) {
  return {JointTolerance{position, velocity}};
}

TEST(JointTrajectoryCoreTest, PositionCommandIsTheSampledTrajectory) {
  Rig rig;
  rig.step();  // holds where it is (0)
  EXPECT_EQ(rig.data->ctrl[0], 0.0);
  rig.core->set_trajectory(7, kNow, {1.0}, {0.5}, {}, {}, tolerance(0), tolerance(0.05, 0.01), 0.0);
  const double start = rig.data->time;
  for (int i = 0; i < 500; ++i) {
    const double t = rig.data->time;
    rig.core->control(rig.model.get(), rig.data.get());
    // Linear from the state at the start (0) to 0.5 at start + 1.
    EXPECT_NEAR(rig.data->ctrl[0], 0.5 * (t - start), 1e-12) << t;
    mj_step(rig.model.get(), rig.data.get());
  }
  EXPECT_EQ(rig.run_until_end(5.0), GoalOutcome::kSucceeded);
  EXPECT_NEAR(rig.data->qpos[0], 0.5, 0.05);
  EXPECT_EQ(rig.core->last_end().goal, 7u);
}

TEST(JointTrajectoryCoreTest, EffortCommandThroughThePidFollowsTheTrajectory) {
  Rig rig(CommandInterface::kEffort, PidGains{900.0, 0.0, 60.0, 0.0});
  rig.model->actuator_gainprm[0] = 0.0;  // the servo off: the motor alone drives the joint
  rig.model->actuator_biasprm[1] = rig.model->actuator_biasprm[2] = 0.0;
  rig.core->set_trajectory(1, kNow, {0.5, 1.0}, {0.1, 0.2}, {}, {}, tolerance(0.05),
                           tolerance(0.01, 0.05), 2.0);
  EXPECT_EQ(rig.run_until_end(5.0), GoalOutcome::kSucceeded);
  EXPECT_NEAR(rig.data->qpos[0], 0.2, 0.01);
  // The motor got the PID's output, not a position.
  JointTrajectorySnapshot snapshot;
  rig.core->snapshot(snapshot);
  EXPECT_EQ(snapshot.output[0], rig.data->ctrl[1]);
}

TEST(JointTrajectoryCoreTest, PathToleranceViolationAbortsAndHolds) {
  Rig rig;
  rig.step();
  // A jump the servo cannot follow within 1 mm.
  rig.core->set_trajectory(3, kNow, {0.2}, {1.0}, {}, {}, tolerance(0.001), tolerance(0), 0.0);
  EXPECT_EQ(rig.run_until_end(1.0), GoalOutcome::kPathToleranceViolated);
  const GoalEnd end = rig.core->last_end();
  EXPECT_EQ(end.joint, 0);
  EXPECT_GT(std::fabs(end.error), 0.001);
  // It holds where the joint was when it aborted (the state copied out then).
  JointTrajectorySnapshot snapshot;
  rig.core->snapshot(snapshot);
  EXPECT_EQ(snapshot.time, end.time);
  rig.step(10);
  EXPECT_EQ(rig.data->ctrl[0], snapshot.actual_position[0]);
}

TEST(JointTrajectoryCoreTest, GoalToleranceNotMetWithinGoalTimeAborts) {
  Rig rig;
  rig.data->qfrc_applied[0] = 4.0;  // the servo settles 1 cm off its command
  rig.core->set_trajectory(4, kNow, {0.1}, {0.3}, {}, {}, tolerance(0), tolerance(0.001, 0.01),
                           0.5);
  EXPECT_EQ(rig.run_until_end(3.0), GoalOutcome::kGoalToleranceViolated);
  EXPECT_GT(rig.data->time, 0.6);  // not before the end plus goal_time
}

TEST(JointTrajectoryCoreTest, StartInTheFutureHoldsUntilThen) {
  Rig rig;
  rig.step();
  rig.core->set_trajectory(5, 0.5, {0.5}, {0.2}, {}, {}, tolerance(0), tolerance(0.01, 0.05), 0.0);
  rig.step(100);  // t = 0.1: before the start
  EXPECT_EQ(rig.data->ctrl[0], 0.0);
  EXPECT_EQ(rig.run_until_end(3.0), GoalOutcome::kSucceeded);
  EXPECT_GE(rig.core->last_end().time, 1.0);
}

TEST(JointTrajectoryCoreTest, HoldStopsTheGoalWhereTheJointIs) {
  Rig rig;
  rig.core->set_trajectory(6, kNow, {1.0}, {1.0}, {}, {}, tolerance(0), tolerance(0.01), 0.0);
  rig.step(300);
  rig.core->hold();
  const double here = rig.data->qpos[0];
  rig.step();
  EXPECT_NEAR(rig.data->ctrl[0], here, 1e-12);
  rig.step(2000);
  EXPECT_EQ(rig.core->last_end().goal, 0u);  // no outcome: the bookkeeping ends such a goal
  EXPECT_NEAR(rig.data->qpos[0], here, 1e-3);
}

TEST(JointTrajectoryCoreTest, EventsCountStateFeedbackAndOutcome) {
  Rig rig;
  const EventCounts none = rig.core->events().wait({}, 0.0);
  EXPECT_EQ(none, EventCounts{});
  rig.core->set_trajectory(8, kNow, {0.2}, {0.1}, {}, {}, tolerance(0), tolerance(0.01, 0.05), 0.0);
  rig.step(100);  // 0.1 s: states every 0.01 s, feedback every 0.05 s
  const EventCounts seen = rig.core->events().wait({}, 0.0);
  EXPECT_EQ(seen.state, 10u);
  EXPECT_EQ(seen.feedback, 2u);
  EXPECT_EQ(rig.run_until_end(3.0), GoalOutcome::kSucceeded);
  EXPECT_EQ(rig.core->events().wait(seen, 1.0).outcome, 1u);
  rig.core->events().close();
  EXPECT_TRUE(rig.core->events().closed());
}

TEST(JointTrajectoryCoreTest, HandOversFromAnotherThreadWhileStepping) {
  // The bookkeeping's thread hands goals over, holds and copies out while this one steps (what
  // TSan checks: every shared field under the controller's mutex).
  Rig rig;
  std::atomic<bool> done{false};
  std::thread bookkeeping([&] {
    JointTrajectorySnapshot snapshot;
    for (std::uint64_t goal = 1; goal <= 200; ++goal) {
      rig.core->set_trajectory(goal, kNow, {0.05, 0.1}, {0.01, 0.02}, {}, {}, tolerance(0),
                               tolerance(0.5, 1.0), 0.0);
      rig.core->snapshot(snapshot);
      rig.core->feedback(snapshot);
      rig.core->last_end();
      rig.core->events().wait(rig.core->events().wait({}, 0.0), 0.0005);
      if (goal % 10 == 0) rig.core->hold();
    }
    done = true;
  });
  while (!done) rig.step();
  bookkeeping.join();
  rig.step(500);
  EXPECT_TRUE(std::isfinite(rig.data->qpos[0]));
}

TEST(JointTrajectoryCoreTest, LayoutsThatDoNotMatchAreRefused) {
  JointTrajectoryLayout layout;
  layout.qpos = {0, 1};
  layout.dof = {0};
  layout.actuator = {0, 1};
  EXPECT_THROW(JointTrajectoryCore{layout}, std::invalid_argument);
}

// One slide finger closing on a fixed block at x = 0.05, by a position servo.
constexpr const char* kFingerXml = R"(
<mujoco>
  <option gravity="0 0 0" timestep="0.001"/>
  <worldbody>
    <geom name="block" type="box" pos="0.1 0 0" size="0.02 0.05 0.05"/>
    <body name="finger">
      <joint name="finger" type="slide" axis="1 0 0" damping="5"/>
      <geom type="box" size="0.01 0.02 0.02" mass="0.1"/>
    </body>
  </worldbody>
  <actuator><position name="finger" joint="finger" kp="200"/></actuator>
</mujoco>)";

// The same finger driven by a motor (the effort command interface).
const std::string kFingerMotorXml = [] {
  std::string xml = kFingerXml;
  const std::string servo = R"(<position name="finger" joint="finger" kp="200"/>)";
  return xml.replace(xml.find(servo), servo.size(), R"(<motor name="finger" joint="finger"/>)");
}();

struct Finger {
  test_models::ModelPtr model;
  test_models::DataPtr data;
  std::unique_ptr<GripperCore> core;
  // `effort`: a motor driven through a Pid, else a position servo.
  explicit Finger(bool effort = false)
      : model(test_models::compile(effort ? kFingerMotorXml.c_str() : kFingerXml)),
        data(test_models::make_data(model.get())) {
    GripperLayout layout;
    layout.qpos = 0;
    layout.dof = 0;
    layout.actuator = 0;
    layout.gain = model->actuator_gainprm[0];
    for (int i = 0; i < 3; ++i) layout.bias[i] = model->actuator_biasprm[i];
    layout.stall_timeout = 0.2;
    layout.effort = effort;
    layout.gains = {200.0, 0.0, 3.0, 0.0};
    core = std::make_unique<GripperCore>(layout);
  }
  GripperState run_until_end(double limit_s) {
    while (data->time < limit_s) {
      core->control(model.get(), data.get());
      mj_step(model.get(), data.get());
      const GripperState end = core->last_end();
      if (end.goal != 0) return end;
    }
    return {};
  }
};

TEST(GripperCoreTest, ReachesAFreePosition) {
  Finger finger;
  finger.core->command(1, 0.03, 0.0);
  const GripperState end = finger.run_until_end(3.0);
  EXPECT_EQ(end.outcome, GripperOutcome::kReached);
  EXPECT_TRUE(end.reached_goal);
  EXPECT_FALSE(end.stalled);
  EXPECT_NEAR(end.position, 0.03, 0.01);
}

TEST(GripperCoreTest, StallsOnTheBlockWithTheForceCappedByMaxEffort) {
  Finger finger;
  // The block's face is at 0.08, the finger's half-width 0.01: it stops near 0.07.
  finger.core->command(2, 0.2, 3.0);
  const GripperState end = finger.run_until_end(5.0);
  EXPECT_EQ(end.outcome, GripperOutcome::kStalled);
  EXPECT_TRUE(end.stalled);
  EXPECT_FALSE(end.reached_goal);
  EXPECT_NEAR(end.position, 0.07, 0.005);
  EXPECT_LE(std::fabs(end.effort), 3.0 + 1e-9);
  EXPECT_NEAR(std::fabs(end.effort), 3.0, 0.05);  // squeezing at the cap
}

TEST(GripperCoreTest, EffortInterfaceReachesAFreePosition) {
  Finger finger(true);
  finger.core->command(1, 0.03, 0.0);
  const GripperState end = finger.run_until_end(3.0);
  EXPECT_EQ(end.outcome, GripperOutcome::kReached);
  EXPECT_NEAR(end.position, 0.03, 0.01);
}

TEST(GripperCoreTest, EffortInterfaceWritesThePidForceClampedByMaxEffort) {
  Finger finger(true);
  finger.core->command(1, 0.03, 0.0);
  finger.core->control(finger.model.get(), finger.data.get());
  EXPECT_DOUBLE_EQ(finger.data->ctrl[0], 200.0 * 0.03);  // p * error at rest, no integral
  finger.core->command(2, 0.03, 2.0);
  finger.core->control(finger.model.get(), finger.data.get());
  EXPECT_DOUBLE_EQ(finger.data->ctrl[0], 2.0);
}

TEST(GripperCoreTest, EffortInterfaceStallsOnTheBlockWithTheForceCappedByMaxEffort) {
  Finger finger(true);
  finger.core->command(2, 0.2, 3.0);
  const GripperState end = finger.run_until_end(5.0);
  EXPECT_EQ(end.outcome, GripperOutcome::kStalled);
  EXPECT_NEAR(end.position, 0.07, 0.005);
  EXPECT_LE(std::fabs(end.effort), 3.0 + 1e-9);
  EXPECT_NEAR(std::fabs(end.effort), 3.0, 0.05);
}

TEST(GripperCoreTest, EffortInterfaceRefusesANegativeIClamp) {
  GripperLayout layout;
  layout.qpos = layout.dof = layout.actuator = 0;
  layout.effort = true;
  layout.gains = {1.0, 1.0, 0.0, -1.0};
  EXPECT_THROW(GripperCore{layout}, std::invalid_argument);
}

}  // namespace
}  // namespace mjfast
