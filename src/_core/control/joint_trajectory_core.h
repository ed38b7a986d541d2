// JointTrajectoryCore: the per-step work of mjfast/JointTrajectoryController (SPEC §23), as
// joint_trajectory_controller's update() does it (ros2_controllers, Jazzy,
// joint_trajectory_controller.cpp): sample the active trajectory at the step's simulated time
// (Trajectory), write the command of the configured interface (position; velocity or effort
// through a Pid per joint plus ff_velocity_scale * desired velocity; position and velocity),
// check the goal's path tolerances before the last point's time and its goal tolerances after it
// (with goal_time as the limit), and hold a position when asked or when a goal aborts. A new
// trajectory is handed over from another thread and installed at the next step; the controller's
// state and a goal's feedback are copied out at their rates; nothing is allocated per step.
// Which joint and actuator is which (MuJoCo addresses) is the caller's: this knows no names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "control/native_control.h"
#include "control/pid.h"
#include "control/trajectory.h"

namespace mjfast {

enum class CommandInterface : int { kPosition, kVelocity, kEffort, kPositionVelocity };

// A joint's tolerance; a value <= 0 is not checked (control_msgs/JointTolerance).
struct JointTolerance {
  double position = 0.0;
  double velocity = 0.0;
};

// How a goal ended by the controller's own checks (cancel, preemption and reset are the
// bookkeeping's). The values are the bookkeeping's to map onto control_msgs' codes.
enum class GoalOutcome : int {
  kActive = 0,
  kSucceeded = 1,
  kPathToleranceViolated = 2,
  kGoalToleranceViolated = 3,
};

struct JointTrajectoryLayout {
  std::vector<int> qpos;    // each joint's qpos address
  std::vector<int> dof;     // each joint's dof address
  std::vector<int> actuator;           // the actuator of the command interface (position, velocity
                                       // or effort; the position one for kPositionVelocity)
  std::vector<int> velocity_actuator;  // kPositionVelocity only: the velocity one
  CommandInterface command = CommandInterface::kPosition;
  std::vector<PidGains> gains;          // velocity and effort commands
  std::vector<double> ff_velocity_scale;  // velocity and effort commands
  bool open_loop = false;  // a new trajectory starts from the last command, not the state
  bool interpolate = true;  // interpolation_method: splines (true) or none
  double state_period = 0.0;     // simulated seconds between state copies; <= 0: none
  double feedback_period = 0.0;  // simulated seconds between a goal's feedback; <= 0: none
};

// The copy of the controller's state that the bookkeeping reads (also a goal's feedback).
struct JointTrajectorySnapshot {
  double time = 0.0;
  std::uint64_t goal = 0;  // the goal being executed, 0 for none
  std::vector<double> desired_position, desired_velocity, desired_acceleration;
  std::vector<double> actual_position, actual_velocity;
  std::vector<double> error_position, error_velocity;
  std::vector<double> output;  // the command written, per joint
};

struct GoalEnd {
  std::uint64_t goal = 0;
  GoalOutcome outcome = GoalOutcome::kActive;
  int joint = -1;        // the joint that violated a tolerance, -1 for none
  double error = 0.0;    // by how much it was off (position error, or velocity error)
  bool velocity = false;  // whether it was the velocity that was off
  double time = 0.0;
};

class JointTrajectoryCore final : public NativeControl {
 public:
  // Throws std::invalid_argument for a layout whose per-joint vectors do not match.
  explicit JointTrajectoryCore(JointTrajectoryLayout layout);

  std::size_t joints() const { return layout_.qpos.size(); }

  // --- any thread: the bookkeeping's side ---------------------------------------------------
  // Hands over a trajectory for goal `goal` (0: a trajectory with no goal, the topic's), starting
  // at simulated time `start` (NaN: the step that installs it); the tolerances hold one entry per
  // joint, `goal_time` <= 0 is no limit. Installed at the next step, replacing the active one.
  // Throws std::invalid_argument for sizes that do not match (nothing handed over).
  void set_trajectory(std::uint64_t goal, double start, std::vector<double> times,
                      std::vector<double> positions, std::vector<double> velocities,
                      std::vector<double> accelerations, std::vector<JointTolerance> path,
                      std::vector<JointTolerance> goal_tolerance, double goal_time);
  // From the next step, hold the joints where they are (a cancel, a reset); any goal stops.
  void hold();
  ControllerEvents& events() { return events_; }
  // Copies the state as of the latest state copy (state_period, and a goal's end), or as of the
  // latest feedback (feedback_period), under the controller's mutex.
  void snapshot(JointTrajectorySnapshot& out);
  void feedback(JointTrajectorySnapshot& out);
  // The last goal end the checks decided.
  GoalEnd last_end();

  // --- the stepping thread --------------------------------------------------------------------
  void control(const mjModel* m, mjData* d) noexcept override;

 private:
  void write_command(mjData* d, double dt);
  void take_snapshot(double time, JointTrajectorySnapshot& into);
  void hold_here();
  void end_goal(GoalOutcome outcome, int joint, double error, bool velocity, double time);

  JointTrajectoryLayout layout_;
  ControllerEvents events_;
  std::vector<Pid> pids_;

  // Guarded by events_.mutex(): the hand-over.
  bool pending_ = false;
  bool hold_requested_ = true;  // the first step holds where the joints are
  std::uint64_t pending_goal_ = 0;
  double pending_start_ = 0.0;
  double pending_goal_time_ = 0.0;
  Trajectory pending_trajectory_;
  std::vector<JointTolerance> pending_path_, pending_goal_tolerance_;
  JointTrajectorySnapshot snapshot_, feedback_;
  GoalEnd last_end_;

  // The stepping thread's own.
  Trajectory active_;
  std::uint64_t goal_ = 0;
  bool executing_ = false;  // a trajectory is active (else: holding)
  bool started_ = false;    // its state-before is taken
  double start_ = 0.0;
  double goal_time_ = 0.0;
  std::vector<JointTolerance> path_, goal_tolerance_;
  std::vector<double> hold_position_;
  std::vector<double> desired_position_, desired_velocity_, desired_acceleration_;
  std::vector<double> actual_position_, actual_velocity_;
  std::vector<double> error_position_, error_velocity_, output_;
  double last_time_ = 0.0;
  bool stepped_ = false;
  double next_state_ = 0.0;
  double next_feedback_ = 0.0;
};

}  // namespace mjfast
