// mjfast/ExternalWrench: pushes a body with a force (and torque) for a while, then lets go.
//
// Configuration:
//   body:      name of the body (required)
//   force:     [fx, fy, fz] in world coordinates, N (default 0)
//   torque:    [tx, ty, tz] in world coordinates, N·m (default 0)
//   point:     [x, y, z] where the force acts, in the body frame (default: the body origin);
//              the moment of the force about the body's centre of mass is added to the torque
//   start:     simulated time at which it starts, s (default 0)
//   duration:  how long it acts, s (required, >= 0)
//   ramp_down: the last ramp_down seconds of the duration scale it down linearly to 0 (default 0)
//
// It writes the body's row of xfrc_applied in pre_step (right before each mj_step, so it has the
// last word over staged commands) while start <= time < start + duration, and explicitly zeroes
// that row once it expires (and at a reset). The momentum it imparts is force × (duration −
// ramp_down / 2).
// State (env.get_state/set_state, SPEC §20): whether it is applying (one byte), which decides
// whether it lets go of the row at expiry.
#include <algorithm>
#include <array>
#include <mjfast/plugin.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace mjfast_plugins {

class ExternalWrench final : public mjfast::Plugin {
 public:
  explicit ExternalWrench(const mjfast::PluginContext& context)
      : Plugin(context),
        body_name_(config().string("body")),
        force_(vector3("force")),
        torque_(vector3("torque")),
        point_(vector3("point")),
        start_(config().number("start", 0.0)),
        duration_(config().number("duration")),
        ramp_(config().number("ramp_down", 0.0)) {
    if (duration_ < 0) throw std::runtime_error("config key 'duration' must be >= 0");
    if (ramp_ < 0 || ramp_ > duration_) {
      throw std::runtime_error("config key 'ramp_down' must be between 0 and 'duration'");
    }
  }

  bool load(const mjModel* m, mjData*) override {
    body_ = mj_name2id(m, mjOBJ_BODY, body_name_.c_str());
    if (body_ < 0) throw std::runtime_error("the model has no body '" + body_name_ + "'");
    if (body_ == 0) throw std::runtime_error("a wrench on the world body does nothing");
    return true;
  }

  void pre_step(const mjModel*, mjData* d) override {
    const double end = start_ + duration_;
    double* row = d->xfrc_applied + 6 * body_;
    if (d->time < start_ || d->time >= end) {
      if (applying_) {  // expired (or not yet started after a reset): let go explicitly
        std::fill(row, row + 6, 0.0);
        applying_ = false;
      }
      return;
    }
    const double scale = ramp_ > 0 ? std::min(1.0, (end - d->time) / ramp_) : 1.0;
    // xfrc_applied acts at the centre of mass (xipos): move the force there, adding its moment.
    double offset[3];
    mju_mulMatVec3(offset, d->xmat + 9 * body_, point_.data());
    for (int k = 0; k < 3; ++k) offset[k] += d->xpos[3 * body_ + k] - d->xipos[3 * body_ + k];
    double moment[3];
    mju_cross(moment, offset, force_.data());
    for (int k = 0; k < 3; ++k) {
      row[k] = scale * force_[k];
      row[3 + k] = scale * (torque_[k] + moment[k]);
    }
    applying_ = true;
  }

  std::string get_state() override { return std::string(1, applying_ ? '\1' : '\0'); }

  void set_state(const std::string& state) override {
    if (state.size() != 1 || (state[0] != '\0' && state[0] != '\1')) {
      throw std::runtime_error("set_state: an ExternalWrench state is one byte, 0 or 1");
    }
    applying_ = state[0] == '\1';
  }

  void on_reset(const mjModel*, mjData* d) override {
    std::fill(d->xfrc_applied + 6 * body_, d->xfrc_applied + 6 * body_ + 6, 0.0);
    applying_ = false;
  }

 private:
  std::array<double, 3> vector3(const std::string& key) const {
    std::array<double, 3> value{0, 0, 0};
    if (!config().has(key)) return value;
    const std::vector<double> numbers = config().numbers(key);
    if (numbers.size() != 3)
      throw std::runtime_error("config key '" + key + "' must have 3 numbers");
    std::copy(numbers.begin(), numbers.end(), value.begin());
    return value;
  }

  std::string body_name_;
  std::array<double, 3> force_, torque_, point_;
  double start_, duration_, ramp_;
  int body_ = -1;
  bool applying_ = false;
};

}  // namespace mjfast_plugins

using mjfast_plugins::ExternalWrench;
MJFAST_PLUGIN(ExternalWrench)
