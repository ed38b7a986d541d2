#include "control_bridge.h"

#include <algorithm>

namespace mjfast {
namespace {

void copy_into(std::vector<mjtNum>& target, const mjtNum* source, int size) {
  std::copy_n(source, size, target.data());
}

void size_state(ControlStateBuffer& state, const mjModel* m) {
  state.qpos.assign(m->nq, 0);
  state.qvel.assign(m->nv, 0);
  state.act.assign(m->na, 0);
  state.qfrc_actuator.assign(m->nv, 0);
  state.sensordata.assign(m->nsensordata, 0);
  state.ctrl.assign(m->nu, 0);
}

void size_commands(CommandBuffer& commands, const mjModel* m) {
  commands.fields = 0;
  commands.ctrl.assign(m->nu, 0);
  commands.qfrc_applied.assign(m->nv, 0);
  commands.xfrc_applied.assign(6 * m->nbody, 0);
}

void adopt_rewritten(std::vector<mjtNum>& commanded, const mjtNum* rewritten, unsigned field,
                     unsigned& fields) {
  if (!std::equal(commanded.begin(), commanded.end(), rewritten)) {
    std::copy_n(rewritten, commanded.size(), commanded.data());
    fields |= field;
  }
}

}  // namespace

void ControlBridge::rebind(const mjModel* model, mjData* scratch, const mjData* live) {
  model_ = model;
  scratch_ = scratch;
  for (ControlStateBuffer& state : snapshots_.all_slots()) size_state(state, model);
  for (CommandBuffer& commands : commands_.all_slots()) size_commands(commands, model);
  clear(live);
}

void ControlBridge::clear(const mjData* live) {
  snapshots_.discard();
  commands_.discard();
  size_commands(commanded_, model_);
  copy_into(commanded_.ctrl, live->ctrl, model_->nu);
  copy_into(commanded_.qfrc_applied, live->qfrc_applied, model_->nv);
  copy_into(commanded_.xfrc_applied, live->xfrc_applied, 6 * model_->nbody);
  if (armed()) {
    publish_snapshot(live);
    snapshots_.take();
  }
}

void ControlBridge::arm(const mjData* live) {
  if (armed()) return;
  armed_.store(true, std::memory_order_relaxed);
  publish_snapshot(live);
}

void ControlBridge::publish_snapshot(const mjData* live) {
  const mjModel* m = model_;
  ControlStateBuffer& state = snapshots_.back();
  state.time = live->time;
  copy_into(state.qpos, live->qpos, m->nq);
  copy_into(state.qvel, live->qvel, m->nv);
  copy_into(state.act, live->act, m->na);
  copy_into(state.qfrc_actuator, live->qfrc_actuator, m->nv);
  copy_into(state.sensordata, live->sensordata, m->nsensordata);
  copy_into(state.ctrl, live->ctrl, m->nu);
  snapshots_.publish();
}

void ControlBridge::apply_commands(mjData* live) {
  commands_.take();
  const CommandBuffer& commands = commands_.front();
  const mjModel* m = model_;
  if (commands.fields & kCtrl) std::copy_n(commands.ctrl.data(), m->nu, live->ctrl);
  if (commands.fields & kQfrcApplied) {
    std::copy_n(commands.qfrc_applied.data(), m->nv, live->qfrc_applied);
  }
  if (commands.fields & kXfrcApplied) {
    std::copy_n(commands.xfrc_applied.data(), 6 * m->nbody, live->xfrc_applied);
  }
}

void ControlBridge::copy_state_into_scratch(const ControlStateBuffer& state) {
  const mjModel* m = model_;
  scratch_->time = state.time;
  std::copy_n(state.qpos.data(), m->nq, scratch_->qpos);
  std::copy_n(state.qvel.data(), m->nv, scratch_->qvel);
  std::copy_n(state.act.data(), m->na, scratch_->act);
  std::copy_n(state.qfrc_actuator.data(), m->nv, scratch_->qfrc_actuator);
  std::copy_n(state.sensordata.data(), m->nsensordata, scratch_->sensordata);
  std::copy_n(state.ctrl.data(), m->nu, scratch_->ctrl);
}

ControlStateView ControlBridge::read_locked(PluginHost* plugins, ModelGeneration tag) {
  snapshots_.take();
  const ControlStateBuffer& state = snapshots_.front();
  if (plugins == nullptr) {
    return {state.time,       state.qpos.data(),       state.qvel.data(), state.act.data(),
            state.qfrc_actuator.data(), state.sensordata.data(), state.ctrl.data()};
  }
  copy_state_into_scratch(state);
  if (DispatchError error = plugins->dispatch_update_read(tag, model_, scratch_)) {
    std::rethrow_exception(error);
  }
  return {scratch_->time,         scratch_->qpos,       scratch_->qvel, scratch_->act,
          scratch_->qfrc_actuator, scratch_->sensordata, scratch_->ctrl};
}

void ControlBridge::write_locked(const mjtNum* ctrl, const mjtNum* qfrc_applied,
                                 const mjtNum* xfrc_applied, PluginHost* plugins,
                                 ModelGeneration tag) {
  const mjModel* m = model_;
  CommandBuffer& staged = commands_.back();
  if (plugins != nullptr) {
    // The plugins run on a copy of the commands, so that a plugin error stages nothing.
    staged = commanded_;
  }
  if (ctrl) {
    copy_into(commanded_.ctrl, ctrl, m->nu);
    commanded_.fields |= kCtrl;
  }
  if (qfrc_applied) {
    copy_into(commanded_.qfrc_applied, qfrc_applied, m->nv);
    commanded_.fields |= kQfrcApplied;
  }
  if (xfrc_applied) {
    copy_into(commanded_.xfrc_applied, xfrc_applied, 6 * m->nbody);
    commanded_.fields |= kXfrcApplied;
  }
  if (plugins != nullptr) {
    snapshots_.take();
    copy_state_into_scratch(snapshots_.front());
    std::copy_n(commanded_.ctrl.data(), m->nu, scratch_->ctrl);
    std::copy_n(commanded_.qfrc_applied.data(), m->nv, scratch_->qfrc_applied);
    std::copy_n(commanded_.xfrc_applied.data(), 6 * m->nbody, scratch_->xfrc_applied);
    if (DispatchError error = plugins->dispatch_update_write(tag, model_, scratch_)) {
      commanded_ = staged;  // back to the commands before this write
      std::rethrow_exception(error);
    }
    // A field the plugins rewrote is a command from now on; one nobody wrote stays its owner's.
    adopt_rewritten(commanded_.ctrl, scratch_->ctrl, kCtrl, commanded_.fields);
    adopt_rewritten(commanded_.qfrc_applied, scratch_->qfrc_applied, kQfrcApplied,
                    commanded_.fields);
    adopt_rewritten(commanded_.xfrc_applied, scratch_->xfrc_applied, kXfrcApplied,
                    commanded_.fields);
  }
  staged.fields = commanded_.fields;
  staged.ctrl = commanded_.ctrl;
  staged.qfrc_applied = commanded_.qfrc_applied;
  staged.xfrc_applied = commanded_.xfrc_applied;
  commands_.publish();
}

}  // namespace mjfast
