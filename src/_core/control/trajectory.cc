#include "control/trajectory.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace mjfast {

void Trajectory::assign(std::size_t joints, std::vector<double> times,
                        std::vector<double> positions, std::vector<double> velocities,
                        std::vector<double> accelerations) {
  const std::size_t values = joints * times.size();
  auto check = [&](const std::vector<double>& field, const char* name, bool optional) {
    if ((optional && field.empty()) || field.size() == values) return;
    throw std::invalid_argument(std::string("trajectory ") + name + ": expected " +
                                std::to_string(values) + " values (" + std::to_string(joints) +
                                " joints x " + std::to_string(times.size()) + " points), got " +
                                std::to_string(field.size()));
  };
  check(positions, "positions", false);
  check(velocities, "velocities", true);
  check(accelerations, "accelerations", true);
  joints_ = joints;
  times_ = std::move(times);
  positions_ = std::move(positions);
  velocities_ = std::move(velocities);
  accelerations_ = std::move(accelerations);
  before_positions_.assign(joints, 0.0);
  before_velocities_.assign(joints, 0.0);
  before_has_velocity_ = false;
  before_time_ = 0.0;
}

void Trajectory::assign_hold(std::size_t joints, const double* positions) {
  assign(joints, {0.0}, std::vector<double>(positions, positions + joints),
         std::vector<double>(joints, 0.0), std::vector<double>(joints, 0.0));
}

void Trajectory::set_state_before(double time, const double* positions,
                                  const double* velocities) {
  before_time_ = time;
  before_has_velocity_ = velocities != nullptr;
  for (std::size_t j = 0; j < joints_; ++j) {
    before_positions_[j] = positions[j];
    before_velocities_[j] = velocities != nullptr ? velocities[j] : 0.0;
  }
}

bool Trajectory::sample(double start, double time, double* position, double* velocity,
                        double* acceleration) const {
  if (times_.empty() || time < start) return false;
  const std::size_t n = joints_;
  const double* vel = velocities_.empty() ? nullptr : velocities_.data();
  const double* acc = accelerations_.empty() ? nullptr : accelerations_.data();
  const double first = start + times_.front();
  if (!interpolate_) {
    std::size_t point = 0;
    while (point + 1 < times_.size() && time >= start + times_[point + 1]) ++point;
    const std::size_t at = point * n;
    const bool last = point + 1 == times_.size() && time >= start + times_.back();
    for (std::size_t j = 0; j < n; ++j) {
      position[j] = positions_[at + j];
      velocity[j] = vel != nullptr && !last ? vel[at + j] : 0.0;
      acceleration[j] = acc != nullptr && !last ? acc[at + j] : 0.0;
    }
    return true;
  }
  if (time < first) {
    // From the state before the trajectory (which has no accelerations) to its first point.
    interpolate_segment(n, first - before_time_, time - before_time_, before_positions_.data(),
                        before_has_velocity_ ? before_velocities_.data() : nullptr, nullptr,
                        positions_.data(), vel, acc, position, velocity, acceleration);
    return true;
  }
  for (std::size_t i = 0; i + 1 < times_.size(); ++i) {
    const double a = start + times_[i];
    const double b = start + times_[i + 1];
    if (time >= a && time < b) {
      const std::size_t ia = i * n;
      const std::size_t ib = (i + 1) * n;
      interpolate_segment(n, b - a, time - a, positions_.data() + ia, vel ? vel + ia : nullptr,
                          acc ? acc + ia : nullptr, positions_.data() + ib,
                          vel ? vel + ib : nullptr, acc ? acc + ib : nullptr, position, velocity,
                          acceleration);
      return true;
    }
  }
  // Played out: the last point's positions, at rest.
  const double* last = positions_.data() + (times_.size() - 1) * n;
  for (std::size_t j = 0; j < n; ++j) {
    position[j] = last[j];
    velocity[j] = 0.0;
    acceleration[j] = 0.0;
  }
  return true;
}

void interpolate_segment(std::size_t joints, double duration, double elapsed, const double* a_pos,
                         const double* a_vel, const double* a_acc, const double* b_pos,
                         const double* b_vel, const double* b_acc, double* position,
                         double* velocity, double* acceleration) {
  bool has_velocity = a_vel != nullptr && b_vel != nullptr;
  bool has_acceleration = has_velocity && a_acc != nullptr && b_acc != nullptr;
  if (elapsed < 0.0) {
    elapsed = 0.0;
    has_velocity = has_acceleration = false;
  }
  if (elapsed > duration) {
    elapsed = duration;
    has_velocity = has_acceleration = false;
  }
  const double t1 = elapsed, t2 = t1 * t1, t3 = t2 * t1, t4 = t3 * t1, t5 = t4 * t1;
  const double T1 = duration, T2 = T1 * T1, T3 = T2 * T1, T4 = T3 * T1, T5 = T4 * T1;
  const bool timed = duration != 0.0;
  for (std::size_t j = 0; j < joints; ++j) {
    const double p0 = a_pos[j], p1 = b_pos[j];
    if (!has_velocity) {
      const double c1 = timed ? (p1 - p0) / T1 : 0.0;
      position[j] = p0 + c1 * t1;
      velocity[j] = c1;
      acceleration[j] = 0.0;
    } else if (!has_acceleration) {
      const double v0 = a_vel[j], v1 = b_vel[j];
      const double c2 = timed ? (-3.0 * p0 + 3.0 * p1 - 2.0 * v0 * T1 - v1 * T1) / T2 : 0.0;
      const double c3 = timed ? (2.0 * p0 - 2.0 * p1 + v0 * T1 + v1 * T1) / T3 : 0.0;
      position[j] = p0 + v0 * t1 + c2 * t2 + c3 * t3;
      velocity[j] = v0 + 2.0 * c2 * t1 + 3.0 * c3 * t2;
      acceleration[j] = 2.0 * c2 + 6.0 * c3 * t1;
    } else {
      const double v0 = a_vel[j], v1 = b_vel[j], q0 = a_acc[j], q1 = b_acc[j];
      const double c2 = 0.5 * q0;
      double c3 = 0.0, c4 = 0.0, c5 = 0.0;
      if (timed) {
        c3 = (-20.0 * p0 + 20.0 * p1 - 3.0 * q0 * T2 + q1 * T2 - 12.0 * v0 * T1 - 8.0 * v1 * T1) /
             (2.0 * T3);
        c4 = (30.0 * p0 - 30.0 * p1 + 3.0 * q0 * T2 - 2.0 * q1 * T2 + 16.0 * v0 * T1 +
              14.0 * v1 * T1) /
             (2.0 * T4);
        c5 = (-12.0 * p0 + 12.0 * p1 - q0 * T2 + q1 * T2 - 6.0 * v0 * T1 - 6.0 * v1 * T1) /
             (2.0 * T5);
      }
      position[j] = p0 + v0 * t1 + c2 * t2 + c3 * t3 + c4 * t4 + c5 * t5;
      velocity[j] = v0 + 2.0 * c2 * t1 + 3.0 * c3 * t2 + 4.0 * c4 * t3 + 5.0 * c5 * t4;
      acceleration[j] = 2.0 * c2 + 6.0 * c3 * t1 + 12.0 * c4 * t2 + 20.0 * c5 * t3;
    }
  }
}

}  // namespace mjfast
