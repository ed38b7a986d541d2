#include "control/joint_trajectory_core.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace mjfast {

JointTrajectoryCore::JointTrajectoryCore(JointTrajectoryLayout layout)
    : layout_(std::move(layout)) {
  const std::size_t n = layout_.qpos.size();
  auto check = [&](std::size_t size, const char* name) {
    if (size != n) {
      throw std::invalid_argument(std::string("JointTrajectoryCore: ") + name + " has " +
                                  std::to_string(size) + " entries for " + std::to_string(n) +
                                  " joints");
    }
  };
  if (n == 0) throw std::invalid_argument("JointTrajectoryCore: no joints");
  check(layout_.dof.size(), "dof");
  check(layout_.actuator.size(), "actuator");
  if (layout_.command == CommandInterface::kPositionVelocity) {
    check(layout_.velocity_actuator.size(), "velocity_actuator");
  }
  if (layout_.command == CommandInterface::kVelocity ||
      layout_.command == CommandInterface::kEffort) {
    check(layout_.gains.size(), "gains");
    check(layout_.ff_velocity_scale.size(), "ff_velocity_scale");
    for (const PidGains& gains : layout_.gains) {
      if (!(gains.i_clamp >= 0.0)) {
        throw std::invalid_argument("JointTrajectoryCore: i_clamp must be >= 0");
      }
      pids_.emplace_back(gains);
    }
  }
  for (auto* field : {&hold_position_, &desired_position_, &desired_velocity_,
                      &desired_acceleration_, &actual_position_, &actual_velocity_,
                      &error_position_, &error_velocity_, &output_}) {
    field->assign(n, 0.0);
  }
  path_.assign(n, {});
  goal_tolerance_.assign(n, {});
  for (JointTrajectorySnapshot* copy : {&snapshot_, &feedback_}) {
    for (auto* field : {&copy->desired_position, &copy->desired_velocity,
                        &copy->desired_acceleration, &copy->actual_position,
                        &copy->actual_velocity, &copy->error_position, &copy->error_velocity,
                        &copy->output}) {
      field->assign(n, 0.0);
    }
  }
}

void JointTrajectoryCore::set_trajectory(std::uint64_t goal, double start,
                                         std::vector<double> times, std::vector<double> positions,
                                         std::vector<double> velocities,
                                         std::vector<double> accelerations,
                                         std::vector<JointTolerance> path,
                                         std::vector<JointTolerance> goal_tolerance,
                                         double goal_time) {
  const std::size_t n = joints();
  if (path.size() != n || goal_tolerance.size() != n) {
    throw std::invalid_argument("set_trajectory: the tolerances need one entry per joint (" +
                                std::to_string(n) + ")");
  }
  if (times.empty()) throw std::invalid_argument("set_trajectory: no points");
  // Built outside the lock (this allocates), handed over under it.
  Trajectory trajectory;
  trajectory.set_interpolate(layout_.interpolate);
  trajectory.assign(n, std::move(times), std::move(positions), std::move(velocities),
                    std::move(accelerations));
  {
    std::lock_guard<std::mutex> lock(events_.mutex());
    std::swap(pending_trajectory_, trajectory);
    pending_path_ = std::move(path);
    pending_goal_tolerance_ = std::move(goal_tolerance);
    pending_goal_ = goal;
    pending_start_ = start;
    pending_goal_time_ = goal_time;
    pending_ = true;
    hold_requested_ = false;
  }
  // `trajectory` now holds what was pending before (if anything): freed here, not in a step.
}

void JointTrajectoryCore::hold() {
  std::lock_guard<std::mutex> lock(events_.mutex());
  pending_ = false;
  hold_requested_ = true;
}

void JointTrajectoryCore::snapshot(JointTrajectorySnapshot& out) {
  std::lock_guard<std::mutex> lock(events_.mutex());
  out = snapshot_;
}

void JointTrajectoryCore::feedback(JointTrajectorySnapshot& out) {
  std::lock_guard<std::mutex> lock(events_.mutex());
  out = feedback_;
}

GoalEnd JointTrajectoryCore::last_end() {
  std::lock_guard<std::mutex> lock(events_.mutex());
  return last_end_;
}

void JointTrajectoryCore::hold_here() {
  // joint_trajectory_controller's set_hold_position(): the measured positions, at rest.
  hold_position_ = actual_position_;  // same size: copies, no allocation
  executing_ = false;
  goal_ = 0;
}

void JointTrajectoryCore::control(const mjModel* /*m*/, mjData* d) noexcept {
  const std::size_t n = joints();
  const double t = d->time;
  const bool time_went_back = stepped_ && t < last_time_;
  const double dt = stepped_ && !time_went_back ? t - last_time_ : 0.0;
  last_time_ = t;
  stepped_ = true;
  for (std::size_t j = 0; j < n; ++j) {
    actual_position_[j] = d->qpos[layout_.qpos[j]];
    actual_velocity_[j] = d->qvel[layout_.dof[j]];
  }
  bool hold_now = false;
  bool installed = false;
  {
    std::lock_guard<std::mutex> lock(events_.mutex());
    if (hold_requested_) {
      hold_requested_ = false;
      hold_now = true;
    } else if (pending_) {
      pending_ = false;
      installed = true;
      // Swaps move buffers: no allocation on this thread; the old ones go back to the hand-over.
      std::swap(active_, pending_trajectory_);
      std::swap(path_, pending_path_);
      std::swap(goal_tolerance_, pending_goal_tolerance_);
      goal_ = pending_goal_;
      start_ = pending_start_;
      goal_time_ = pending_goal_time_;
    }
  }
  if (time_went_back) {
    next_state_ = t;
    next_feedback_ = t;
  }
  if (hold_now) hold_here();
  if (installed) {
    executing_ = true;
    started_ = false;
    next_feedback_ = t;
  }
  if (executing_ && !started_) {
    // The state the first segment starts from: joint_trajectory_controller's
    // set_point_before_trajectory_msg (the last command instead with open_loop_control).
    started_ = true;
    if (std::isnan(start_)) start_ = t;
    const bool from_command = layout_.open_loop;
    active_.set_state_before(t, from_command ? desired_position_.data() : actual_position_.data(),
                             from_command ? desired_velocity_.data() : actual_velocity_.data());
  }
  bool sampled = false;
  if (executing_) {
    sampled = active_.sample(start_, t, desired_position_.data(), desired_velocity_.data(),
                             desired_acceleration_.data());
  } else {
    for (std::size_t j = 0; j < n; ++j) {
      desired_position_[j] = hold_position_[j];
      desired_velocity_[j] = 0.0;
      desired_acceleration_[j] = 0.0;
    }
  }
  // Before a trajectory's start nothing new is sampled: the last desired state stays.
  for (std::size_t j = 0; j < n; ++j) {
    error_position_[j] = desired_position_[j] - actual_position_[j];
    error_velocity_[j] = desired_velocity_[j] - actual_velocity_[j];
  }
  write_command(d, dt);

  // The goal's checks (joint_trajectory_controller's update(), with an active goal only).
  GoalEnd end;
  if (executing_ && sampled && goal_ != 0) {
    const double end_time = start_ + active_.duration();
    if (t < end_time) {
      for (std::size_t j = 0; j < n && end.goal == 0; ++j) {
        const JointTolerance& tol = path_[j];
        if (tol.position > 0.0 && std::fabs(error_position_[j]) > tol.position) {
          end = {goal_, GoalOutcome::kPathToleranceViolated, static_cast<int>(j),
                 error_position_[j], false, t};
        } else if (tol.velocity > 0.0 && std::fabs(error_velocity_[j]) > tol.velocity) {
          end = {goal_, GoalOutcome::kPathToleranceViolated, static_cast<int>(j),
                 error_velocity_[j], true, t};
        }
      }
    } else {
      int outside = -1;
      bool velocity = false;
      for (std::size_t j = 0; j < n && outside < 0; ++j) {
        const JointTolerance& tol = goal_tolerance_[j];
        if (tol.position > 0.0 && std::fabs(error_position_[j]) > tol.position) {
          outside = static_cast<int>(j);
        } else if (tol.velocity > 0.0 && std::fabs(error_velocity_[j]) > tol.velocity) {
          outside = static_cast<int>(j);
          velocity = true;
        }
      }
      if (outside < 0) {
        end = {goal_, GoalOutcome::kSucceeded, -1, 0.0, false, t};
      } else if (goal_time_ > 0.0 && t > end_time + goal_time_) {
        const std::size_t j = static_cast<std::size_t>(outside);
        end = {goal_, GoalOutcome::kGoalToleranceViolated, outside,
               velocity ? error_velocity_[j] : error_position_[j], velocity, t};
      }
    }
    if (end.goal != 0) {
      if (end.outcome == GoalOutcome::kSucceeded) {
        goal_ = 0;  // the last point stays held; nothing more to check
      } else {
        hold_here();  // an aborted goal holds where the joints are
      }
    }
  }

  const bool state_due = layout_.state_period > 0.0 && t >= next_state_;
  const bool feedback_due =
      goal_ != 0 && executing_ && layout_.feedback_period > 0.0 && t >= next_feedback_;
  if (!state_due && !feedback_due && end.goal == 0) return;
  if (state_due) next_state_ = t + layout_.state_period;
  if (feedback_due) next_feedback_ = t + layout_.feedback_period;
  {
    std::lock_guard<std::mutex> lock(events_.mutex());
    if (state_due || end.goal != 0) take_snapshot(t, snapshot_);
    if (feedback_due) take_snapshot(t, feedback_);
    EventCounts& counts = events_.counts();
    if (state_due) ++counts.state;
    if (feedback_due) ++counts.feedback;
    if (end.goal != 0) {
      last_end_ = end;
      ++counts.outcome;
    }
  }
  if (end.goal != 0) events_.notify();
}

void JointTrajectoryCore::take_snapshot(double time, JointTrajectorySnapshot& into) {
  // Same sizes throughout: element copies, no allocation.
  into.time = time;
  into.goal = goal_;
  into.desired_position = desired_position_;
  into.desired_velocity = desired_velocity_;
  into.desired_acceleration = desired_acceleration_;
  into.actual_position = actual_position_;
  into.actual_velocity = actual_velocity_;
  into.error_position = error_position_;
  into.error_velocity = error_velocity_;
  into.output = output_;
}

void JointTrajectoryCore::write_command(mjData* d, double dt) {
  const std::size_t n = joints();
  for (std::size_t j = 0; j < n; ++j) {
    double command = 0.0;
    switch (layout_.command) {
      case CommandInterface::kPosition:
        command = desired_position_[j];
        break;
      case CommandInterface::kPositionVelocity:
        command = desired_position_[j];
        d->ctrl[layout_.velocity_actuator[j]] = desired_velocity_[j];
        break;
      case CommandInterface::kVelocity:
      case CommandInterface::kEffort:
        command = desired_velocity_[j] * layout_.ff_velocity_scale[j] +
                  pids_[j].compute(error_position_[j], error_velocity_[j], dt);
        break;
    }
    d->ctrl[layout_.actuator[j]] = command;
    output_[j] = command;
  }
}

}  // namespace mjfast
