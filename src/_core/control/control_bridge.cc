#include "control/control_bridge.h"

#include <algorithm>

namespace mjfast {
namespace {

template <std::size_t N>
void size_fields(FieldValues<N>& values, const DataField (&table)[N], const mjModel* m) {
  for (std::size_t i = 0; i < N; ++i) values[i].assign(table[i].size(m), 0);
}

template <std::size_t N>
void copy_from_data(FieldValues<N>& values, const DataField (&table)[N], const mjModel* m,
                    const mjData* d) {
  for (std::size_t i = 0; i < N; ++i) {
    std::copy_n(d->*table[i].member, table[i].size(m), values[i].data());
  }
}

template <std::size_t N>
void copy_into_data(mjData* d, const DataField (&table)[N], const mjModel* m,
                    const FieldValues<N>& values) {
  for (std::size_t i = 0; i < N; ++i) {
    std::copy_n(values[i].data(), table[i].size(m), d->*table[i].member);
  }
}

constexpr unsigned field_bit(std::size_t i) { return 1u << i; }

}  // namespace

void ControlBridge::rebind(const mjModel* model, mjData* scratch, const mjData* live) {
  model_ = model;
  scratch_ = scratch;
  for (ControlStateBuffer& state : snapshots_.all_slots()) {
    size_fields(state.fields, kStateFields, model);
  }
  for (CommandBuffer& commands : commands_.all_slots()) {
    commands.written = 0;
    size_fields(commands.fields, kCommandFields, model);
  }
  clear(live);
}

void ControlBridge::clear(const mjData* live) {
  snapshots_.discard();
  commands_.discard();
  commanded_.written = 0;
  size_fields(commanded_.fields, kCommandFields, model_);
  copy_from_data(commanded_.fields, kCommandFields, model_, live);
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
  ControlStateBuffer& state = snapshots_.back();
  state.time = live->time;
  copy_from_data(state.fields, kStateFields, model_, live);
  snapshots_.publish();
}

void ControlBridge::apply_commands(mjData* live) {
  commands_.take();
  const CommandBuffer& commands = commands_.front();
  for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
    if (commands.written & field_bit(i)) {
      std::copy_n(commands.fields[i].data(), kCommandFields[i].size(model_),
                  live->*kCommandFields[i].member);
    }
  }
}

void ControlBridge::copy_state_into_scratch(const ControlStateBuffer& state) {
  scratch_->time = state.time;
  copy_into_data(scratch_, kStateFields, model_, state.fields);
}

ControlStateView ControlBridge::read_locked(PluginHost* plugins, ModelGeneration tag) {
  snapshots_.take();
  const ControlStateBuffer& state = snapshots_.front();
  ControlStateView view{state.time, {}};
  if (plugins == nullptr) {
    for (std::size_t i = 0; i < kStateFieldCount; ++i) view.fields[i] = state.fields[i].data();
    return view;
  }
  copy_state_into_scratch(state);
  if (DispatchError error = plugins->dispatch_update_read(tag, model_, scratch_)) {
    std::rethrow_exception(error);
  }
  view.time = scratch_->time;
  for (std::size_t i = 0; i < kStateFieldCount; ++i) {
    view.fields[i] = scratch_->*kStateFields[i].member;
  }
  return view;
}

void ControlBridge::write_locked(const Commands& commands, PluginHost* plugins,
                                 ModelGeneration tag) {
  CommandBuffer& staged = commands_.back();
  if (plugins != nullptr) {
    // The plugins run on a copy of the commands, so that a plugin error stages nothing.
    staged = commanded_;
  }
  for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
    if (commands[i] == nullptr) continue;
    std::copy_n(commands[i], kCommandFields[i].size(model_), commanded_.fields[i].data());
    commanded_.written |= field_bit(i);
  }
  if (plugins != nullptr) {
    snapshots_.take();
    copy_state_into_scratch(snapshots_.front());
    copy_into_data(scratch_, kCommandFields, model_, commanded_.fields);
    if (DispatchError error = plugins->dispatch_update_write(tag, model_, scratch_)) {
      commanded_ = staged;  // back to the commands before this write
      std::rethrow_exception(error);
    }
    // A field the plugins rewrote is a command from now on; one nobody wrote stays its owner's.
    for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
      std::vector<mjtNum>& commanded = commanded_.fields[i];
      const mjtNum* rewritten = scratch_->*kCommandFields[i].member;
      if (!std::equal(commanded.begin(), commanded.end(), rewritten)) {
        std::copy_n(rewritten, commanded.size(), commanded.data());
        commanded_.written |= field_bit(i);
      }
    }
  }
  staged = commanded_;
  commands_.publish();
}

}  // namespace mjfast
