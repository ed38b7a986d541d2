// StepRecorder: what a recording (SPEC §20) needs from the stepping thread, copied into a bounded
// ring that a writer thread drains: the physics state (mj_getState, mjSTATE_INTEGRATION) at the
// start and every `state_every` steps (or, with state_every 0, whenever simulated time crosses a
// multiple of `state_period`), and the commands the control bridge applied before a step, with
// the step they took effect at. On the stepping thread it only copies: no Python, no allocation
// once a slot has held a state of the bound model, and one leaf lock (7 in env_core.h's order)
// held for the copy. A full ring drops the entry and counts it, or, with `wait_when_full` (what a
// recording does: nothing is lost), the stepping thread waits for the writer's next drain and the
// wait is counted (back-pressure). It knows nothing of bags or Python.
#pragma once

#include <mujoco/mujoco.h>

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "control/control_bridge.h"

namespace mjfast {

class StepRecorder {
 public:
  enum class Kind : int { kState = 0, kCommands = 1 };
  struct Entry {
    Kind kind = Kind::kState;
    std::uint64_t step = 0;        // steps since the recording started when this took effect
    std::uint64_t step_count = 0;  // the env's step_count then (steps since its last reset)
    std::uint64_t model_generation = 0;
    double time = 0.0;    // simulated time
    unsigned fields = 0;  // kCommands: bit i set for kCommandFields[i], concatenated in `values`
    std::array<std::size_t, kCommandFieldCount> field_sizes{};  // kCommands: each one's length
    std::vector<mjtNum> values;
  };

  // `capacity` entries at most wait for the writer; `state_every` > 0 captures a state every that
  // many steps, else every `state_period` seconds of simulated time (<= 0: none after the first).
  // `replaying`: the env replays a recording, whose control commands replay writes into the data
  // itself at the steps they took effect; commands staged by the env's own control bridge (a
  // replayed publish reaching a plugin that writes through env.control) are dropped unapplied.
  StepRecorder(std::size_t capacity, std::uint64_t state_every, double state_period,
               bool replaying = false, bool wait_when_full = false);
  bool replaying() const { return replaying_; }

  // ---- stepping thread (EnvCore's step mutex held) ----------------------------------------------
  // After the control bridge applied staged commands (fields: its written bits), before mj_step.
  void commands_applied(const mjModel* m, const mjData* d, unsigned fields,
                        std::uint64_t model_generation);
  // At the end of every step.
  void after_step(const mjModel* m, const mjData* d, std::uint64_t step_count,
                  std::uint64_t model_generation);
  // Where the recording starts (attached with stepping paused): the state schedule starts at
  // `d`'s time. The first state itself is the caller's (a full SimState, plugins included).
  void begin(const mjModel* m, const mjData* d);

  // ---- any thread -------------------------------------------------------------------------------
  // Steps since the recording started (exact at a step boundary, with stepping held).
  std::uint64_t steps() const { return steps_.load(std::memory_order_acquire); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // How often the stepping thread waited for the writer (wait_when_full).
  std::uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }
  // Ends the waiting: a stepping thread waiting for room goes on (its entry dropped, counted),
  // and so does every later one. For a writer that will drain no more.
  void close();
  // Moves the waiting entries into out[0, n), oldest first, and returns n; it swaps buffers, so
  // that the ring's slots and `out`'s entries keep their memory from one drain to the next.
  std::size_t drain(std::vector<Entry>& out);

 private:
  // The next free slot, or null (counted as dropped); `lock` holds ring_mutex_ (released while
  // waiting for room, with wait_when_full).
  Entry* claim(std::unique_lock<std::mutex>& lock);
  double next_multiple(double time) const;  // of state_period_, after `time`
  void capture_state_locked(std::unique_lock<std::mutex>& lock, const mjModel* m, const mjData* d,
                            std::uint64_t step_count, std::uint64_t model_generation);

  std::mutex ring_mutex_;         // a leaf: held for one copy, never while taking another lock
  std::condition_variable room_;  // a drain freed the ring, or close()
  bool closed_ = false;           // under ring_mutex_
  std::vector<Entry> ring_;
  std::size_t head_ = 0;  // oldest waiting entry
  std::size_t size_ = 0;  // waiting entries
  const std::uint64_t state_every_;
  const double state_period_;
  const bool replaying_;
  const bool wait_when_full_;
  double next_state_time_ = 0.0;  // stepping thread's
  double last_time_ = 0.0;        // stepping thread's
  std::atomic<std::uint64_t> steps_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> waits_{0};
};

}  // namespace mjfast
