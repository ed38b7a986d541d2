// ControlBridge: the ros2_control-style hardware interface between a control loop and the physics
// side (SPEC §7). The physics side publishes a control-state snapshot after each step and applies
// staged commands before the next; the control side reads snapshots and stages commands. The two
// meet only through lock-free triple buffers, so neither ever waits for the other. It owns no
// plugins (it calls the host's update_read/update_write dispatch) and knows nothing of Python.
//
// Threads and locks (the order: env_core.h):
//   physics side (whoever steps, under EnvCore's step mutex): publish(), apply_staged(). Lock-free.
//   control side (any thread): the rest, serialised by the owner's control mutex
//   (EnvCore::control_mutex_), which the physics side never holds, so it is never held across
//   mj_step. rebind()/clear()/arm() run with stepping paused AND that mutex held.
#pragma once

#include <mujoco/mujoco.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <vector>

#include "common/generation.h"
#include "plugin_host/plugin_host.h"

namespace mjfast {

// Single-producer, single-consumer exchange of whole values: the producer fills back() and
// publishes; the consumer takes the newest published value into front(). Neither waits.
template <class T>
class TripleBuffer {
 public:
  T& back() { return slots_[back_]; }
  void publish() { back_ = middle_.exchange(back_ | kFresh, std::memory_order_acq_rel) & kIndex; }
  bool has_fresh() const { return middle_.load(std::memory_order_acquire) & kFresh; }
  bool take() {
    if (!has_fresh()) return false;
    front_ = middle_.exchange(front_, std::memory_order_acq_rel) & kIndex;
    return true;
  }
  const T& front() const { return slots_[front_]; }
  // Only while neither side runs (stepping paused, control mutex held).
  std::array<T, 3>& all_slots() { return slots_; }
  void discard() {
    middle_.store(1, std::memory_order_release);
    back_ = 0;
    front_ = 2;
  }

 private:
  static constexpr unsigned kIndex = 3;
  static constexpr unsigned kFresh = 4;
  std::array<T, 3> slots_{};
  std::atomic<unsigned> middle_{1};
  unsigned back_ = 0;   // producer's
  unsigned front_ = 2;  // consumer's
};

// One mjData array the bridge carries, and its shape for a model: `rows`, or (rows, columns).
struct DataField {
  const char* name;
  mjtNum* mjData::* member;
  mjtSize mjModel::* rows;
  int columns;  // 0: a vector of `rows` values
  mjtSize size(const mjModel* m) const { return m->*rows * (columns ? columns : 1); }
};

// THE control-state fields (time aside) in ControlState's order, and the command fields in
// write()'s order: everything that copies, sizes, validates or names them is derived from these.
inline constexpr DataField kStateFields[] = {
    {"qpos", &mjData::qpos, &mjModel::nq, 0},
    {"qvel", &mjData::qvel, &mjModel::nv, 0},
    {"act", &mjData::act, &mjModel::na, 0},
    {"qfrc_actuator", &mjData::qfrc_actuator, &mjModel::nv, 0},
    {"sensordata", &mjData::sensordata, &mjModel::nsensordata, 0},
    {"ctrl", &mjData::ctrl, &mjModel::nu, 0},
};
inline constexpr DataField kCommandFields[] = {
    {"ctrl", &mjData::ctrl, &mjModel::nu, 0},
    {"qfrc_applied", &mjData::qfrc_applied, &mjModel::nv, 0},
    {"xfrc_applied", &mjData::xfrc_applied, &mjModel::nbody, 6},
};
inline constexpr std::size_t kStateFieldCount = std::size(kStateFields);
inline constexpr std::size_t kCommandFieldCount = std::size(kCommandFields);

// One value per field of a table, in its order.
template <std::size_t N>
using FieldValues = std::array<std::vector<mjtNum>, N>;
template <std::size_t N>
using FieldPointers = std::array<const mjtNum*, N>;

struct ControlStateBuffer {
  double time = 0.0;
  FieldValues<kStateFieldCount> fields;
};

struct CommandBuffer {
  unsigned written = 0;  // bit i: kCommandFields[i] is to be applied
  FieldValues<kCommandFieldCount> fields;
};

// Pointers to one consistent control state (a snapshot or the scratch data after update_read).
struct ControlStateView {
  double time;
  FieldPointers<kStateFieldCount> fields;
};

// Commands to stage, one per kCommandFields entry (null: not written).
using Commands = FieldPointers<kCommandFieldCount>;

class ControlBridge {
 public:
  // Sizes the buffers for a (new) model; `scratch` is the mjData update_read/update_write run on.
  void rebind(const mjModel* model, mjData* scratch, const mjData* live);
  // The scratch data alone (null at rebind() until a plugin needs it), under the same lock.
  void set_scratch(mjData* scratch) { scratch_ = scratch; }
  bool has_scratch() const { return scratch_ != nullptr; }
  // Drops staged commands and republishes the live state (after a reset).
  void clear(const mjData* live);

  // Physics side. Snapshots are published only once a control caller has armed the bridge, so an
  // env nobody controls pays one predictable branch per step.
  void arm(const mjData* live);
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  void publish(const mjData* live) {
    if (armed()) publish_snapshot(live);
  }
  // Whether there were staged commands to apply (applied_fields() then says which).
  bool apply_staged(mjData* live) {
    if (!commands_.has_fresh()) return false;
    apply_commands(live);
    return true;
  }
  // Takes the staged commands without applying them (a replay applies recorded ones instead).
  void drop_staged() { commands_.take(); }
  // The kCommandFields bits the last apply_staged() wrote (physics side).
  unsigned applied_fields() const { return commands_.front().written; }

  // Control side: call with the owner's control mutex held.
  const mjModel* model() const { return model_; }
  // The newest snapshot. With `plugins` (the host, when it has update_read plugins), it is copied
  // into the scratch data and passed through them first; a plugin error is thrown.
  ControlStateView read_locked(PluginHost* plugins, ModelGeneration tag);
  // Stages commands (null: not written), validated by the caller. With `plugins` (the host, when
  // it has update_write plugins), they run on the scratch data holding a recent snapshot and the
  // commands, and may rewrite them; a plugin error is thrown and nothing is staged.
  void write_locked(const Commands& commands, PluginHost* plugins, ModelGeneration tag);
  // After a MuJoCo error in an update_read/update_write plugin: the scratch data is reset (what a
  // plugin sees of it beyond the control state is stale anyway).
  void reset_scratch() { mj_resetData(model_, scratch_); }

 private:
  void publish_snapshot(const mjData* live);
  void apply_commands(mjData* live);
  void copy_state_into_scratch(const ControlStateBuffer& state);

  const mjModel* model_ = nullptr;
  mjData* scratch_ = nullptr;
  std::atomic<bool> armed_{false};
  TripleBuffer<ControlStateBuffer> snapshots_;
  TripleBuffer<CommandBuffer> commands_;
  // Control side's record of every command written so far (an entry never written keeps its
  // last value): guarded by the owner's control mutex.
  CommandBuffer commanded_;
};

}  // namespace mjfast
