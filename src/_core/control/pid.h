// Pid: the PID that joint_trajectory_controller runs per joint for velocity and effort commands
// (control_toolbox::Pid as JTC builds it, Jazzy): p * error + the integral of i * error, clamped
// to [-i_clamp, i_clamp] (so i_clamp 0 leaves no integral, as there), + d * error_dot. Allocates
// nothing; knows nothing of MuJoCo or Python.
#pragma once

#include <algorithm>

namespace mjfast {

struct PidGains {
  double p = 0.0;
  double i = 0.0;
  double d = 0.0;
  double i_clamp = 0.0;
};

class Pid {
 public:
  Pid() = default;
  explicit Pid(const PidGains& gains) : gains_(gains) {}

  const PidGains& gains() const { return gains_; }
  void reset() { integral_ = 0.0; }
  double integral() const { return integral_; }

  // The command for `error` (desired - actual) and its rate `error_dot` over a step of `dt`
  // seconds (dt <= 0: no integration, as control_toolbox skips such a step's integral).
  double compute(double error, double error_dot, double dt) {
    if (dt > 0.0) {
      integral_ = std::clamp(integral_ + gains_.i * dt * error, -gains_.i_clamp, gains_.i_clamp);
    }
    return gains_.p * error + integral_ + gains_.d * error_dot;
  }

 private:
  PidGains gains_;
  double integral_ = 0.0;
};

}  // namespace mjfast
