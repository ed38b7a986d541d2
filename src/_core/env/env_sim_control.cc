// EnvCore's simulation control (SPEC §13): the user's pause, the real-time factor (its rule, and
// its measurement from the figures every stepping thread adds), and a plugin's pause and reset
// requests (SimulationRequests).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {

void EnvCore::pause_stepping() {
  check_can_step("pause()");
  bool was_paused = false;
  // A pacing wait in progress ends now.
  physics_.signal([&] { was_paused = user_paused_.exchange(true, std::memory_order_acq_rel); });
  if (was_paused || !running() || holds_steps()) return;
  // The physics thread re-checks the flag once it holds step_mutex_: after this, it steps no more.
  std::lock_guard<std::mutex> boundary(step_mutex_);
}

void EnvCore::resume_stepping() {
  check_can_step("resume()");
  // The thread re-anchors its pacing after its wait.
  physics_.signal([&] { user_paused_.store(false, std::memory_order_release); });
}

void EnvCore::set_realtime_factor(std::optional<double> realtime_factor) {
  checked_realtime_factor(realtime_factor);
  physics_.set_realtime_factor(realtime_factor.value_or(0.0));  // a pacing wait ends
  restart_measure();  // a running thread restarts it again once it has taken the change
}

std::optional<double> EnvCore::checked_realtime_factor(std::optional<double> factor,
                                                       const std::string& shown) {
  if (factor && !(*factor > 0.0 && std::isfinite(*factor))) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", *factor);
    throw std::invalid_argument("realtime_factor must be a positive finite number or None, got " +
                                (shown.empty() ? std::string(text) : shown));
  }
  return factor;
}

void EnvCore::record_stepping(Clock::duration wall, double simulated, std::uint64_t steps,
                              Clock::duration elapsed) {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  stats_.steps += steps;
  stats_.stepping_wall_s += std::chrono::duration<double>(wall).count();
  if (simulated > 0) stats_.simulated_s += simulated;  // a reset in between moves time back
  stats_.elapsed_wall_s += std::chrono::duration<double>(elapsed).count();
  if (simulated > 0) measure_.simulated_s += simulated;
  measure_.elapsed_s += std::chrono::duration<double>(elapsed).count();
  if (measure_.elapsed_s >= kMeasureWindow) {
    measure_.measured = measure_.simulated_s / measure_.elapsed_s;
    measure_.full = true;
    measure_.simulated_s = measure_.elapsed_s = 0.0;
  }
}

EnvStatistics EnvCore::statistics() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  EnvStatistics copy = stats_;
  copy.running = running();
  return copy;
}

void EnvCore::restart_measure() {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  measure_.simulated_s = measure_.elapsed_s = 0.0;
}

std::optional<double> EnvCore::realtime_factor() const {
  const double factor = physics_.realtime_factor();
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
  // the physics thread's mutex is never held while taking those, so this cannot invert the order.
  physics_.signal([&] { user_paused_.store(true, std::memory_order_release); });
}

void EnvCore::request_reset(std::optional<std::string> keyframe) {
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    requested_keyframe_ = std::move(keyframe);  // a later request replaces an earlier one
  }
  // A paused physics thread carries it out now.
  physics_.signal([&] { reset_requested_.store(true, std::memory_order_release); });
}

void EnvCore::set_reset_request_hooks(ResetRequestHooks hooks) {
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    std::swap(reset_request_hooks_, hooks);
  }
  // The previous hooks go here, outside the lock (their release may take the GIL).
}

void EnvCore::carry_out_reset_request_locked() {
  std::optional<std::string> keyframe;
  ResetRequestHooks hooks;
  {
    std::lock_guard<std::mutex> lock(request_mutex_);
    keyframe = std::exchange(requested_keyframe_, std::nullopt);
    reset_requested_.store(false, std::memory_order_release);
    hooks = reset_request_hooks_;
  }
  if (!hooks.resolve) return;
  try {
    std::optional<ResetTarget> target = hooks.resolve(keyframe);
    mujoco_guard::reinstall();  // resolving called mujoco's bindings, which set their own handler
    if (target) reset_world(*target);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (const std::exception& error) {
    mujoco_guard::reinstall();
    report_reset_failure(hooks, keyframe, error.what());
  }
  catch (...) {
    mujoco_guard::reinstall();
    report_reset_failure(hooks, keyframe, "an unknown error");
  }
}

void EnvCore::report_reset_failure(const ResetRequestHooks& hooks,
                                   const std::optional<std::string>& keyframe,
                                   const std::string& message) {
  try {
    if (hooks.report) hooks.report(keyframe, message);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    record_error(std::current_exception());  // reporting failed: raised after the step instead
  }
}

void EnvCore::reset_world(const ResetTarget& target) {
  const auto nq = static_cast<std::size_t>(model_->nq);
  const auto nv = static_cast<std::size_t>(model_->nv);
  if (target.keyframe >= model_->nkey || target.keyframe < -1) {
    throw std::invalid_argument("reset: no keyframe with index " + std::to_string(target.keyframe) +
                                " (the model has " + std::to_string(model_->nkey) + ")");
  }
  if ((!target.qpos.empty() && target.qpos.size() != nq) ||
      (!target.qvel.empty() && target.qvel.size() != nv)) {
    throw std::invalid_argument("reset: the target state has " +
                                std::to_string(target.qpos.size()) + " positions and " +
                                std::to_string(target.qvel.size()) + " velocities, the model " +
                                std::to_string(nq) + " and " + std::to_string(nv));
  }
  const double time = data_->time;
  if (target.keyframe >= 0) {
    mj_resetDataKeyframe(model_, data_, target.keyframe);
  } else {
    mj_resetData(model_, data_);
  }
  std::copy(target.qpos.begin(), target.qpos.end(), data_->qpos);
  std::copy(target.qvel.begin(), target.qvel.end(), data_->qvel);
  if (target.keep_time) data_->time = time;
  clear_simulation_fault();        // a MuJoCo error's undefined state is gone
  forward_callback_free("reset");  // plugins learn of a reset through reset()
  reset_step_count();
  render_->notify_time_reset();
  reset_plugins();
}

}  // namespace mjfast
