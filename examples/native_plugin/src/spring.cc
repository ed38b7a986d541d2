// mjfast_example/Spring: a passive joint-space spring, qfrc_passive += -stiffness * (q - rest).
//
// Configuration:
//   joints:    [names]   hinge or slide joints (required)
//   stiffness: number    N·m/rad or N/m (required)
//   rest:      number    rest position of every joint (default 0)
#include <mjfast/plugin.hpp>
#include <stdexcept>
#include <string>
#include <vector>

class Spring final : public mjfast::Plugin {
 public:
  explicit Spring(const mjfast::PluginContext& context)
      : Plugin(context),
        stiffness_(config().number("stiffness")),
        rest_(config().number("rest", 0.0)) {
    for (const mjfast::Config& joint : config().at("joints").items()) {
      names_.push_back(joint.as_string());
    }
  }

  bool load(const mjModel* m, mjData*) override {
    for (const std::string& name : names_) {
      const int joint = mj_name2id(m, mjOBJ_JOINT, name.c_str());
      if (joint < 0) throw std::runtime_error("the model has no joint '" + name + "'");
      qpos_.push_back(m->jnt_qposadr[joint]);
      dof_.push_back(m->jnt_dofadr[joint]);
    }
    return true;
  }

  // Passive forces are accumulated by MuJoCo before this callback: add, never overwrite.
  void passive(const mjModel*, mjData* d) override {
    for (std::size_t i = 0; i < qpos_.size(); ++i) {
      d->qfrc_passive[dof_[i]] += -stiffness_ * (d->qpos[qpos_[i]] - rest_);
    }
  }

 private:
  double stiffness_;
  double rest_;
  std::vector<std::string> names_;
  std::vector<int> qpos_, dof_;
};

MJFAST_PLUGIN(Spring)
