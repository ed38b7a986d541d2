// NativeControl: a compiled per-step controller that a Python plugin owns (SPEC §23's
// JointTrajectoryController and GripperActionController): the plugin keeps its goal bookkeeping in
// Python and hands this object to its adapter, which gives the host its control() as the plugin's
// DirectCallback, so the step never enters Python for it. ControllerEvents is how such a
// controller tells the bookkeeping's thread that something happened (feedback due, state due, a
// goal's outcome) without that thread polling. Neither knows Python.
//
// Locks: each controller's mutex is a leaf of the lock order (env/env_core.h): the stepping
// thread takes it briefly inside control(), the bookkeeping's thread around copies, and neither
// takes another lock while holding it.
#pragma once

#include <mujoco/mujoco.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

struct mjfast_error;

namespace mjfast {

class NativeControl {
 public:
  virtual ~NativeControl() = default;
  // The per-step work, on the stepping thread (from mjcb_control, so also from mj_forward).
  // Allocates nothing and never throws.
  virtual void control(const mjModel* m, mjData* d) noexcept = 0;

  // `control` as the host's DirectCallback function (plugin_host/plugin_adapter.h).
  static int entry(void* self, const mjModel* m, mjData* d, mjfast_error* /*error*/) {
    static_cast<NativeControl*>(self)->control(m, d);
    return 0;
  }
};

// Counts of what happened, each growing by one per event; the waiting side compares them with
// those it has seen. Only a goal's end wakes it (notify()): the copies made at the state and
// feedback rates are read when it next looks (it polls at a wall-clock period), so a simulation
// stepping far faster than real time never pays a thread wake-up per copy.
struct EventCounts {
  std::uint64_t feedback = 0;  // a goal's feedback is due (action_monitor_rate)
  std::uint64_t state = 0;     // the controller's state is due (state_publish_rate)
  std::uint64_t outcome = 0;   // a goal ended (succeeded or aborted by the controller)
  bool operator==(const EventCounts& o) const {
    return feedback == o.feedback && state == o.state && outcome == o.outcome;
  }
  bool operator!=(const EventCounts& o) const { return !(*this == o); }
};

class ControllerEvents {
 public:
  std::mutex& mutex() { return mutex_; }
  // With mutex() held: what has happened so far.
  EventCounts& counts() { return counts_; }
  // After releasing mutex(), once counts().outcome changed: wakes the waiting thread (no
  // allocation; a futex wake only while someone waits).
  void notify() { changed_.notify_all(); }
  // Until the outcome count differs from `seen`'s, close() is called, or `timeout_s` passes;
  // returns all the counts.
  EventCounts wait(const EventCounts& seen, double timeout_s) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                      [&] { return closed_ || counts_.outcome != seen.outcome; });
    return counts_;
  }
  // Wakes every waiter for good (the owning plugin unloads).
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    changed_.notify_all();
  }
  bool closed() {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  EventCounts counts_;
  bool closed_ = false;
};

}  // namespace mjfast
