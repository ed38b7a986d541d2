#include "control/gripper_core.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace mjfast {

GripperCore::GripperCore(const GripperLayout& layout) : layout_(layout), pid_(layout.gains) {
  if (layout_.qpos < 0 || layout_.dof < 0 || layout_.actuator < 0) {
    throw std::invalid_argument("GripperCore: the joint and actuator addresses are required");
  }
  if (!(layout_.gain > 0.0)) {
    throw std::invalid_argument("GripperCore: the actuator's gain must be > 0");
  }
  if (layout_.effort && !(layout_.gains.i_clamp >= 0.0)) {
    throw std::invalid_argument("GripperCore: i_clamp must be >= 0");
  }
}

double GripperCore::ctrl_for_force(const mjData* d, double force) const {
  const int a = layout_.actuator;
  const double bias = layout_.bias[0] + layout_.bias[1] * d->actuator_length[a] +
                      layout_.bias[2] * d->actuator_velocity[a];
  return (force - bias) / layout_.gain;
}

void GripperCore::command(std::uint64_t goal, double position, double max_effort) {
  std::lock_guard<std::mutex> lock(events_.mutex());
  pending_ = true;
  hold_requested_ = false;
  pending_goal_ = goal;
  pending_position_ = position;
  pending_effort_ = max_effort;
}

void GripperCore::hold() {
  std::lock_guard<std::mutex> lock(events_.mutex());
  pending_ = false;
  hold_requested_ = true;
}

GripperState GripperCore::feedback() {
  std::lock_guard<std::mutex> lock(events_.mutex());
  return feedback_;
}

GripperState GripperCore::last_end() {
  std::lock_guard<std::mutex> lock(events_.mutex());
  return last_end_;
}

void GripperCore::control(const mjModel* /*m*/, mjData* d) noexcept {
  const double t = d->time;
  const bool time_went_back = stepped_ && t < last_time_;
  const double dt = stepped_ && !time_went_back ? t - last_time_ : 0.0;
  last_time_ = t;
  stepped_ = true;
  const double position = d->qpos[layout_.qpos];
  const double velocity = d->qvel[layout_.dof];
  bool installed = false;
  {
    std::lock_guard<std::mutex> lock(events_.mutex());
    if (hold_requested_) {
      hold_requested_ = false;
      goal_ = 0;
      target_ = position;
      max_effort_ = 0.0;
    } else if (pending_) {
      pending_ = false;
      installed = true;
      goal_ = pending_goal_;
      target_ = pending_position_;
      max_effort_ = pending_effort_;
    }
  }
  if (installed || time_went_back) {
    last_movement_ = t;
    next_feedback_ = t;
  }
  if (time_went_back) pid_.reset();  // a reset: no integral carried over from before it
  const int a = layout_.actuator;
  double ctrl = 0.0;
  if (layout_.effort) {
    // hardware_interface_adapter.hpp's effort updateCommand(): the Pid on the position error
    // with -velocity as the error's rate, clamped to +-max_effort.
    double force = pid_.compute(target_ - position, -velocity, dt);
    if (max_effort_ > 0.0) force = std::clamp(force, -max_effort_, max_effort_);
    ctrl = ctrl_for_force(d, force);
  } else {
    ctrl = target_;
    if (max_effort_ > 0.0) {
      ctrl = std::clamp(ctrl, ctrl_for_force(d, -max_effort_), ctrl_for_force(d, max_effort_));
    }
  }
  d->ctrl[a] = ctrl;

  // check_for_success(): reached, else stalled after stall_timeout without movement.
  GripperOutcome outcome = GripperOutcome::kActive;
  if (goal_ != 0) {
    if (std::fabs(target_ - position) < layout_.goal_tolerance) {
      outcome = GripperOutcome::kReached;
    } else if (std::fabs(velocity) > layout_.stall_velocity_threshold) {
      last_movement_ = t;
    } else if (t - last_movement_ > layout_.stall_timeout) {
      outcome = GripperOutcome::kStalled;
    }
  }
  const bool feedback_due = goal_ != 0 && layout_.feedback_period > 0.0 && t >= next_feedback_;
  if (!feedback_due && outcome == GripperOutcome::kActive) return;
  if (feedback_due) next_feedback_ = t + layout_.feedback_period;
  {
    std::lock_guard<std::mutex> lock(events_.mutex());
    feedback_ = {t,
                 goal_,
                 position,
                 d->actuator_force[a],
                 outcome == GripperOutcome::kStalled,
                 outcome == GripperOutcome::kReached,
                 outcome};
    EventCounts& counts = events_.counts();
    if (feedback_due) ++counts.feedback;
    if (outcome != GripperOutcome::kActive) {
      last_end_ = feedback_;
      ++counts.outcome;
    }
  }
  if (outcome != GripperOutcome::kActive) {
    goal_ = 0;  // the position stays commanded
    events_.notify();
  }
}

}  // namespace mjfast
