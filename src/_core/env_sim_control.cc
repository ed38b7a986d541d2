// EnvCore's simulation control (SPEC §13): the user's pause, the real-time factor and its
// measurement, and a plugin's pause and reset requests (SimulationRequests).
#include <utility>

#include "env_core.h"
#include "errors.h"
#include "mujoco_guard.h"

namespace mjfast {

void EnvCore::pause_stepping() {
  check_can_step("pause()");
  bool was_paused = false;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    was_paused = user_paused_.exchange(true, std::memory_order_acq_rel);
  }
  thread_wakeup_.notify_all();  // a pacing wait in progress ends now
  if (was_paused || !running() || holds_steps()) return;
  // The physics thread re-checks the flag once it holds step_mutex_: after this, it steps no more.
  std::lock_guard<std::mutex> boundary(step_mutex_);
}

void EnvCore::resume_stepping() {
  check_can_step("resume()");
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    user_paused_.store(false, std::memory_order_release);
  }
  thread_wakeup_.notify_all();  // the thread re-anchors its pacing after a wait
}

void EnvCore::set_realtime_factor(std::optional<double> realtime_factor) {
  checked_realtime_factor(realtime_factor);
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    realtime_factor_.store(realtime_factor.value_or(0.0), std::memory_order_release);
  }
  thread_wakeup_.notify_all();
  restart_measure();  // a running thread restarts it again once it has taken the change
}

void EnvCore::restart_measure() {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  measure_.simulated_s = measure_.elapsed_s = 0.0;
}

std::optional<double> EnvCore::realtime_factor() const {
  const double factor = realtime_factor_.load(std::memory_order_acquire);
  if (factor > 0) return factor;
  return std::nullopt;
}

double EnvCore::measured_realtime_factor() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  if (measure_.elapsed_s >= kMeasureWindow / 5) return measure_.simulated_s / measure_.elapsed_s;
  if (measure_.full) return measure_.measured;
  return stats_.elapsed_wall_s > 0 ? stats_.simulated_s / stats_.elapsed_wall_s : 0.0;
}

void EnvCore::request_pause() {
  // May come from inside a step (the physics thread holds step_mutex_ and maybe the host mutex):
  // thread_mutex_ is never held while taking those, so this cannot invert the order.
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    user_paused_.store(true, std::memory_order_release);
  }
  thread_wakeup_.notify_all();
}

void EnvCore::request_reset(std::optional<std::string> keyframe) {
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    requested_keyframe_ = std::move(keyframe);  // a later request replaces an earlier one
  }
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    reset_requested_.store(true, std::memory_order_release);
  }
  thread_wakeup_.notify_all();  // a paused physics thread carries it out now
}

void EnvCore::set_reset_request_handler(ResetRequestHandler handler) {
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    std::swap(reset_request_handler_, handler);
  }
  // The previous handler goes here, outside the lock (its release may take the GIL).
}

void EnvCore::honour_reset_request_locked() {
  std::optional<std::string> keyframe;
  ResetRequestHandler handler;
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    keyframe = std::exchange(requested_keyframe_, std::nullopt);
    reset_requested_.store(false, std::memory_order_release);
    handler = reset_request_handler_;
  }
  if (!handler) return;
  try {
    handler(keyframe);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    record_error(std::current_exception());  // the handler reports its own; this is a backstop
  }
  mujoco_guard::reinstall();  // the reset called mujoco's bindings, which set their own handler
}

}  // namespace mjfast
