// mjfast/PDController: joint-space PD on `ctrl` from mjcb_control.
//
//   ctrl[a_i] = clamp(kp_i * (target_i - qpos_i) - kd_i * qvel_i, limits)
//
// Configuration:
//   joints:   [names]            hinge or slide joints (required)
//   actuators: [names]           the actuator driving each joint (default: the actuator whose
//                                transmission is that joint; a joint without one is an error)
//   gains:    {kp: x | [x...], kd: x | [x...]}   (required; a number applies to every joint)
//   targets:  [x...]             initial targets (default: each joint's qpos0)
//   limits:   {min: x, max: x}   clamp of the output (default: the actuator's ctrlrange when it
//                                is ctrllimited, else none)
// Written targets: `with env.acquire_plugin(name) as pd: pd.call("set_targets", "[0.1, 0.2]")`
// (a JSON list in joint order, or a JSON mapping {"joint": value} for some joints);
// `pd.call("targets")` returns the current targets as a JSON list.
// State (env.get_state/set_state, SPEC §20): the targets, which set_targets moves (8 bytes per
// joint, native byte order).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mjfast/plugin.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace mjfast_plugins {

class PDController final : public mjfast::Plugin {
 public:
  explicit PDController(const mjfast::PluginContext& context) : Plugin(context) {
    const mjfast::Config& joints = config().at("joints");
    for (const mjfast::Config& joint : joints.items()) joint_names_.push_back(joint.as_string());
    if (joint_names_.empty()) throw std::runtime_error("config key 'joints' is empty");
    if (config().has("actuators")) {
      for (const mjfast::Config& a : config().at("actuators").items()) {
        actuator_names_.push_back(a.as_string());
      }
      if (actuator_names_.size() != joint_names_.size()) {
        throw std::runtime_error("config key 'actuators' must name one actuator per joint");
      }
    }
    kp_ = per_joint("gains.kp");
    kd_ = per_joint("gains.kd");
    if (config().has("targets")) {
      targets_ = config().numbers("targets");
      if (targets_.size() != joint_names_.size()) {
        throw std::runtime_error("config key 'targets' must have one value per joint");
      }
    }
    if (config().has("limits")) {
      lower_ = config().number("limits.min", -std::numeric_limits<double>::infinity());
      upper_ = config().number("limits.max", std::numeric_limits<double>::infinity());
      configured_limits_ = true;
    }
  }

  bool load(const mjModel* m, mjData*) override {
    const std::size_t n = joint_names_.size();
    qpos_.assign(n, 0);
    qvel_.assign(n, 0);
    actuators_.assign(n, -1);
    for (std::size_t i = 0; i < n; ++i) {
      const int joint = mj_name2id(m, mjOBJ_JOINT, joint_names_[i].c_str());
      if (joint < 0) throw std::runtime_error("the model has no joint '" + joint_names_[i] + "'");
      if (m->jnt_type[joint] != mjJNT_HINGE && m->jnt_type[joint] != mjJNT_SLIDE) {
        throw std::runtime_error("joint '" + joint_names_[i] + "' is not a hinge or slide joint");
      }
      qpos_[i] = m->jnt_qposadr[joint];
      qvel_[i] = m->jnt_dofadr[joint];
      if (!actuator_names_.empty()) {
        actuators_[i] = mj_name2id(m, mjOBJ_ACTUATOR, actuator_names_[i].c_str());
        if (actuators_[i] < 0) {
          throw std::runtime_error("the model has no actuator '" + actuator_names_[i] + "'");
        }
      } else {
        for (int a = 0; a < m->nu; ++a) {
          if (m->actuator_trntype[a] == mjTRN_JOINT && m->actuator_trnid[2 * a] == joint) {
            actuators_[i] = a;
            break;
          }
        }
        if (actuators_[i] < 0) {
          throw std::runtime_error("no actuator drives joint '" + joint_names_[i] +
                                   "' (name one under 'actuators')");
        }
      }
    }
    if (targets_.empty()) {
      for (std::size_t i = 0; i < n; ++i) targets_.push_back(m->qpos0[qpos_[i]]);
    }
    lower_bounds_.assign(n, lower_);
    upper_bounds_.assign(n, upper_);
    if (!configured_limits_) {
      for (std::size_t i = 0; i < n; ++i) {
        const int a = actuators_[i];
        if (m->actuator_ctrllimited[a]) {
          lower_bounds_[i] = m->actuator_ctrlrange[2 * a];
          upper_bounds_[i] = m->actuator_ctrlrange[2 * a + 1];
        } else {
          lower_bounds_[i] = -std::numeric_limits<double>::infinity();
          upper_bounds_[i] = std::numeric_limits<double>::infinity();
        }
      }
    }
    return true;
  }

  void control(const mjModel*, mjData* d) override {
    const std::size_t n = targets_.size();
    for (std::size_t i = 0; i < n; ++i) {
      const double u = kp_[i] * (targets_[i] - d->qpos[qpos_[i]]) - kd_[i] * d->qvel[qvel_[i]];
      d->ctrl[actuators_[i]] = std::clamp(u, lower_bounds_[i], upper_bounds_[i]);
    }
  }

  std::string get_state() override {
    return std::string(reinterpret_cast<const char*>(targets_.data()),
                       targets_.size() * sizeof(double));
  }

  void set_state(const std::string& state) override {
    if (state.size() != joint_names_.size() * sizeof(double)) {
      throw std::runtime_error("set_state: a PDController state of " +
                               std::to_string(joint_names_.size()) + " joints has " +
                               std::to_string(joint_names_.size() * sizeof(double)) +
                               " bytes, got " + std::to_string(state.size()));
    }
    std::vector<double> next(joint_names_.size());
    std::memcpy(next.data(), state.data(), state.size());
    for (double target : next) {
      if (!std::isfinite(target)) throw std::runtime_error("set_state: targets must be finite");
    }
    targets_ = std::move(next);
  }

  std::string call(const std::string& command, const std::string& argument) override {
    if (command == "targets") {
      std::ostringstream out;
      out.precision(17);
      out << '[';
      for (std::size_t i = 0; i < targets_.size(); ++i) out << (i ? ", " : "") << targets_[i];
      out << ']';
      return out.str();
    }
    if (command == "set_targets") {
      const mjfast::Config value = mjfast::Config::parse(argument);
      std::vector<double> next = targets_;
      if (value.is_list()) {
        next = value.as_numbers();
        if (next.size() != joint_names_.size()) {
          throw std::runtime_error("set_targets: expected " + std::to_string(joint_names_.size()) +
                                   " values, got " + std::to_string(next.size()));
        }
      } else {
        for (const std::string& key : value.keys()) {
          auto it = std::find(joint_names_.begin(), joint_names_.end(), key);
          if (it == joint_names_.end()) {
            throw std::runtime_error("set_targets: '" + key +
                                     "' is not one of this controller's joints");
          }
          next[static_cast<std::size_t>(it - joint_names_.begin())] = value.at(key).as_number();
        }
      }
      for (double target : next) {
        if (!std::isfinite(target)) throw std::runtime_error("set_targets: targets must be finite");
      }
      targets_ = std::move(next);
      return "ok";
    }
    return Plugin::call(command, argument);
  }

 private:
  std::vector<double> per_joint(const std::string& key) const {
    const mjfast::Config& value = config().at(key);
    if (value.is_list()) {
      std::vector<double> values = value.as_numbers();
      if (values.size() != joint_names_.size()) {
        throw std::runtime_error("config key '" + key + "' must have one value per joint");
      }
      return values;
    }
    return std::vector<double>(joint_names_.size(), value.as_number());
  }

  std::vector<std::string> joint_names_;
  std::vector<std::string> actuator_names_;
  std::vector<double> kp_, kd_, targets_;
  std::vector<int> qpos_, qvel_, actuators_;
  double lower_ = -std::numeric_limits<double>::infinity();
  double upper_ = std::numeric_limits<double>::infinity();
  bool configured_limits_ = false;
  std::vector<double> lower_bounds_, upper_bounds_;
};

}  // namespace mjfast_plugins

using mjfast_plugins::PDController;
MJFAST_PLUGIN(PDController)
