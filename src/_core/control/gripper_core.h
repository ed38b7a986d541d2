// GripperCore: the per-step work of mjfast/GripperActionController (SPEC §23), as
// ros2_controllers' gripper_action_controller does it (Jazzy, gripper_action_controller_impl.hpp:
// update() and check_for_success()): drive one joint's actuator toward the commanded position,
// with the actuator's force kept within the goal's max_effort, and decide the goal: reached when
// the position is within goal_tolerance; stalled when the joint has moved slower than
// stall_velocity_threshold for stall_timeout (simulated seconds) without reaching it.
//
// Two command interfaces, as gripper_action_controller's two variants
// (position_controllers/GripperActionController and effort_controllers/GripperActionController,
// Jazzy: hardware_interface_adapter.hpp): `position` writes the commanded position to a position
// servo; `effort` runs a Pid on the position error (and -velocity as its rate) and writes its
// output, clamped to +-max_effort, as the force of a motor.
//
// The force cap: the actuator is a fixed-gain one with an affine bias (a MuJoCo position servo
// or a motor), force = gain * ctrl + b0 + b1 * length + b2 * velocity, so |force| <= max_effort
// is a range of ctrl, computed each step from the actuator's length and velocity (for `effort`,
// the clamped force is turned into ctrl the same way). Allocates nothing per step; knows no names.
#pragma once

#include <cstdint>

#include "control/native_control.h"
#include "control/pid.h"

namespace mjfast {

struct GripperLayout {
  int qpos = -1;
  int dof = -1;
  int actuator = -1;
  double gain = 1.0;                 // actuator_gainprm[0] (> 0)
  double bias[3] = {0.0, 0.0, 0.0};  // actuator_biasprm[0..2]
  double goal_tolerance = 0.01;
  double stall_velocity_threshold = 0.001;
  double stall_timeout = 1.0;
  double feedback_period = 0.0;  // simulated seconds between a goal's feedback; <= 0: none
  bool effort = false;           // the effort interface (a Pid), else the position one
  PidGains gains;                // the effort interface's
};

enum class GripperOutcome : int { kActive = 0, kReached = 1, kStalled = 2 };

struct GripperState {
  double time = 0.0;
  std::uint64_t goal = 0;
  double position = 0.0;  // the joint's
  double effort = 0.0;    // the actuator's force
  bool stalled = false;
  bool reached_goal = false;
  GripperOutcome outcome = GripperOutcome::kActive;  // for the last goal end
};

class GripperCore final : public NativeControl {
 public:
  // Throws std::invalid_argument for a gain <= 0 or missing addresses.
  explicit GripperCore(const GripperLayout& layout);

  // --- any thread ---------------------------------------------------------------------------
  // Goal `goal` (non-zero): move to `position` with the actuator's force within `max_effort`
  // (<= 0: no cap beyond the actuator's own; gripper_action_controller's effort adapter would
  // command no force at all with 0, which MoveIt's default max_effort of 0 would leave a gripper
  // that never moves). From the next step.
  void command(std::uint64_t goal, double position, double max_effort);
  // Hold where the joint is from the next step (a cancel, a reset); any goal stops.
  void hold();
  ControllerEvents& events() { return events_; }
  GripperState feedback();  // the latest state copied out
  GripperState last_end();  // the state when the last goal ended

  // --- the stepping thread --------------------------------------------------------------------
  void control(const mjModel* m, mjData* d) noexcept override;

 private:
  // The ctrl that makes the actuator's force `force` (gain * ctrl + bias = force).
  double ctrl_for_force(const mjData* d, double force) const;

  GripperLayout layout_;
  ControllerEvents events_;
  Pid pid_;  // the effort interface's; the stepping thread's
  // Guarded by events_.mutex().
  bool pending_ = false;
  bool hold_requested_ = true;
  std::uint64_t pending_goal_ = 0;
  double pending_position_ = 0.0;
  double pending_effort_ = 0.0;
  GripperState feedback_, last_end_;
  // The stepping thread's.
  std::uint64_t goal_ = 0;
  double target_ = 0.0;
  double max_effort_ = 0.0;
  double last_movement_ = 0.0;
  double next_feedback_ = 0.0;
  double last_time_ = 0.0;
  bool stepped_ = false;
};

}  // namespace mjfast
