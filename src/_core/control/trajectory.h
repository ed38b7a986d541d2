// Trajectory: the points of one joint trajectory and their sampling, as ros2_controllers'
// joint_trajectory_controller samples them (joint_trajectory_controller/src/trajectory.cpp:
// Trajectory::sample and interpolate_between_points, Jazzy): between two points a linear segment
// when they carry positions only, a cubic one with velocities, a quintic one with velocities and
// accelerations; before the first point, a segment from the state the trajectory started from;
// after the last point, its positions held at rest. Points are set when a goal arrives (that
// allocates); sampling allocates nothing. Knows nothing of MuJoCo or Python.
#pragma once

#include <cstddef>
#include <vector>

namespace mjfast {

class Trajectory {
 public:
  // Replaces the points: `times` are the points' times from the start (seconds, increasing);
  // `positions` holds joints() values per point, `velocities` and `accelerations` as many or
  // none. Throws std::invalid_argument naming what does not match (nothing changed then).
  void assign(std::size_t joints, std::vector<double> times, std::vector<double> positions,
              std::vector<double> velocities = {}, std::vector<double> accelerations = {});
  // One point, at rest, at `positions` from time 0: what a hold is.
  void assign_hold(std::size_t joints, const double* positions);

  bool empty() const { return times_.empty(); }
  std::size_t joints() const { return joints_; }
  std::size_t points() const { return times_.size(); }
  bool has_velocities() const { return !velocities_.empty(); }
  bool has_accelerations() const { return !accelerations_.empty(); }
  // The last point's time from the start.
  double duration() const { return times_.empty() ? 0.0 : times_.back(); }

  // interpolation_method `none` (false): no spline; each point's state is held from its time
  // until the next point's (and the first point's from the start), as
  // joint_trajectory_controller's InterpolationMethod::NONE. Default true (`splines`).
  void set_interpolate(bool interpolate) { interpolate_ = interpolate; }

  // The state the trajectory starts from, at simulated `time` (the controller's first step with
  // it): the first segment runs from here to the first point. `velocities` may be null (no
  // velocity state: that segment is then linear, as in joint_trajectory_controller).
  void set_state_before(double time, const double* positions, const double* velocities);

  // The desired state at simulated `time` of a trajectory that starts at `start` (its points'
  // times count from there), joints() values into each output. False, writing nothing, before
  // `start` or for an empty trajectory.
  bool sample(double start, double time, double* position, double* velocity,
              double* acceleration) const;

 private:
  std::size_t joints_ = 0;
  std::vector<double> times_, positions_, velocities_, accelerations_;
  bool interpolate_ = true;
  double before_time_ = 0.0;
  bool before_has_velocity_ = false;
  std::vector<double> before_positions_, before_velocities_;
};

// One segment between state a (at time 0) and state b (at `duration`), sampled at `elapsed`, for
// `joints` joints; a_vel/b_vel/a_acc/b_acc may be null. The spline's order follows what both ends
// carry (linear, cubic, quintic); outside [0, duration] the segment is clamped and linear, as in
// interpolate_between_points. Writes position, velocity and acceleration.
void interpolate_segment(std::size_t joints, double duration, double elapsed, const double* a_pos,
                         const double* a_vel, const double* a_acc, const double* b_pos,
                         const double* b_vel, const double* b_acc, double* position,
                         double* velocity, double* acceleration);

}  // namespace mjfast
