#include "env_core.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

#include "errors.h"

namespace mjfast {
namespace {

using Clock = std::chrono::steady_clock;

// After a stall longer than this (a slow plugin, a debugger), the pacing re-anchors instead of
// running flat out to catch up.
constexpr auto kMaxPacingLag = std::chrono::milliseconds(100);

// Running time over which measured_realtime_factor() is taken.
constexpr double kMeasureWindow = 0.5;

}  // namespace

EnvCore::~EnvCore() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() refuses only where the env is in use on this thread.
  }
}

void EnvCore::bind(const mjModel* model, mjData* data, mjData* control_scratch) {
  if (data_) hooks::unregister_pair(data_);
  model_ = model;
  data_ = data;
  host_.bind_model(model, data);
  {
    std::lock_guard<std::mutex> control_lock(control_.control_mutex());
    control_.rebind(model, control_scratch, data);
  }
  model_generation_.fetch_add(1, std::memory_order_acq_rel);
  hooks::register_pair(model, data, weak_from_this());
}

void EnvCore::load_next_plugin_generation() {
  const auto next = plugin_generation_.fetch_add(1, std::memory_order_acq_rel) + 1;
  const SimulationRequests::CreationScope creating(weak_from_this());  // native host services
  host_.load_generation(model_generation(), PluginGeneration(next));
}

void EnvCore::check_can_step(const char* what) const {
  if (closed_) throw std::logic_error(std::string(what) + " on a closed env");
  if (hooks::in_dispatch()) {
    throw std::logic_error(std::string(what) + " called from inside a plugin callback");
  }
  if (host_.scope_held_by_this_thread()) {
    throw std::logic_error(std::string(what) +
                           " inside an acquire_plugin() block would deadlock: leave the block "
                           "first");
  }
}

void EnvCore::step_once_locked() {
  const ModelGeneration generation = model_generation();
  control_.apply_staged(data_);
  // One host lock for the whole step instead of one per dispatch (the per-step cost of native
  // plugins is otherwise dominated by the four lock/unlock pairs); skipped with no plugins. It is
  // the physics side's mutex: a control thread's update_read/update_write never waits on it.
  std::optional<PluginHost::StepLock> host_lock;
  if (host_.has_any_callback()) host_lock.emplace(host_);
  if (host_.has_callback(Callback::kPreStep)) {
    hooks::DispatchScope dispatching;
    try {
      record_error(host_.dispatch_pre_step(generation, model_, data_));
    } catch (...) {
      record_error(std::current_exception());  // e.g. a stale generation: raised after the step
    }
  }
  mj_step(model_, data_);
  step_count_.store(step_count_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (host_.has_callback(Callback::kLastStage)) {
    hooks::DispatchScope dispatching;
    try {
      record_error(host_.dispatch_last_stage(generation, model_, data_));
    } catch (...) {
      record_error(std::current_exception());
    }
  }
  control_.publish(data_);
  // The render turn: one predictable comparison per step while no camera is due. The host lock
  // is not held across it (render_sync waits for the render thread there).
  if (step_observer_ && data_->time >= step_observer_->next_due_time()) {
    host_lock.reset();
    try {
      record_error(step_observer_->after_step(model_, data_, generation));
    } catch (...) {
      record_error(std::current_exception());
    }
  }
}

void EnvCore::record_error(DispatchError error) {
  if (!error) return;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (!pending_error_) pending_error_ = std::move(error);  // the first error is the one raised
  pending_flag_.store(true, std::memory_order_release);
}

void EnvCore::rethrow_pending_error() {
  DispatchError error;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    error = std::exchange(pending_error_, nullptr);
    pending_flag_.store(false, std::memory_order_release);
  }
  if (error) std::rethrow_exception(error);
}

void EnvCore::raise_if(const DispatchError& error) {
  if (error) std::rethrow_exception(error);
}

void EnvCore::step(int n) {
  if (n < 0) throw std::invalid_argument("step(n) needs n >= 0, got " + std::to_string(n));
  check_can_step("step()");
  if (running() && !stepping_paused()) {
    throw std::logic_error("step() while the physics thread runs: call pause() or stop() first");
  }
  hooks::check_owned();
  std::unique_lock<std::mutex> lock(step_mutex_);
  if (closed_) throw std::logic_error("step() on a closed env");  // closed while we waited
  int done = 0;
  while (done < n) {
    // One stretch of steps, until done or until reset/reload/a geometry edit asks to pause:
    // they run at the next step boundary, not after the whole step(n).
    {
      hooks::SteppingScope stepping(model_, data_, this);
      const auto wall_start = Clock::now();
      const double sim_start = data_->time;
      int stretch = 0;
      while (done < n && pause_requests_.load(std::memory_order_acquire) == 0) {
        if (reset_requested()) honour_reset_request_locked();
        step_once_locked();
        ++done;
        ++stretch;
        if (has_pending_error()) break;
      }
      const auto wall = Clock::now() - wall_start;
      record_stepping(wall, data_->time - sim_start, static_cast<std::uint64_t>(stretch), wall);
    }
    if (has_pending_error()) break;
    if (done < n) {
      lock.unlock();
      {
        std::unique_lock<std::mutex> wait(thread_mutex_);
        thread_wakeup_.wait(wait, [&] { return pause_requests_.load() == 0; });
      }
      lock.lock();
      if (closed_) throw std::logic_error("the env was closed during step()");
    }
  }
  if (has_pending_error()) rethrow_pending_error();
}

void EnvCore::on_control(const mjModel* m, mjData* d) {
  // Inside this thread's acquire_plugin block no dispatch may run (SPEC §6): MuJoCo's own call
  // proceeds without plugins.
  if (!host_.has_callback(Callback::kControl) || host_.scope_held_by_this_thread()) return;
  hooks::DispatchScope dispatching;
  try {
    record_error(host_.dispatch_control(model_generation(), m, d));
  } catch (...) {
    // Nothing may unwind through MuJoCo's C frames: a stale-generation error is kept and thrown
    // by the step that made this call.
    record_error(std::current_exception());
  }
}

void EnvCore::on_passive(const mjModel* m, mjData* d) {
  if (!host_.has_callback(Callback::kPassive) || host_.scope_held_by_this_thread()) return;
  hooks::DispatchScope dispatching;
  try {
    record_error(host_.dispatch_passive(model_generation(), m, d));
  } catch (...) {
    record_error(std::current_exception());
  }
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

void EnvCore::pause() {
  const auto me = std::this_thread::get_id();
  if (pause_owner_.load() == me) {
    ++pause_depth_;
    return;
  }
  check_can_step("pausing the env");
  pause_requests_.fetch_add(1, std::memory_order_acq_rel);
  step_mutex_.lock();
  pause_owner_.store(me);
  pause_depth_ = 1;
}

void EnvCore::resume() {
  if (pause_owner_.load() != std::this_thread::get_id()) {
    throw std::logic_error("resume() from a thread that did not pause the env");
  }
  if (--pause_depth_ > 0) return;
  pause_owner_.store(std::thread::id{});
  step_mutex_.unlock();
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    pause_requests_.fetch_sub(1, std::memory_order_acq_rel);
  }
  thread_wakeup_.notify_all();
}

void EnvCore::reset_plugins() {
  {
    std::lock_guard<std::mutex> control_lock(control_.control_mutex());
    control_.clear(data_);
  }
  hooks::DispatchScope dispatching;
  raise_if(host_.reset(model_generation()));
}

void EnvCore::notify_geometry_changed(int geom_id) {
  hooks::DispatchScope dispatching;
  raise_if(host_.notify_geometry_changed(model_generation(), geom_id));
}

void EnvCore::arm_control() {
  if (control_.armed()) return;
  pause();
  try {
    std::lock_guard<std::mutex> control_lock(control_.control_mutex());
    control_.arm(data_);
  } catch (...) {
    resume();
    throw;
  }
  resume();
}

void EnvCore::start(std::optional<double> realtime_factor) {
  check_can_step("start()");
  if (realtime_factor && !(*realtime_factor > 0.0)) {
    throw std::invalid_argument("realtime_factor must be a positive number or None, got " +
                                std::to_string(*realtime_factor));
  }
  hooks::check_owned();
  std::lock_guard<std::mutex> lock(thread_mutex_);
  if (running_.load()) throw std::logic_error("start() while the physics thread already runs");
  stop_requested_ = false;
  realtime_factor_.store(realtime_factor.value_or(0.0), std::memory_order_release);
  running_.store(true, std::memory_order_release);
  physics_thread_ = std::thread([this] { run_physics(); });
}

void EnvCore::stop() {
  std::thread finished;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    if (!physics_thread_.joinable()) {
      user_paused_.store(false, std::memory_order_release);  // stop() clears a pending pause too
      return;
    }
    if (physics_thread_.get_id() == std::this_thread::get_id()) {
      throw std::logic_error("stop() called from a plugin callback on the physics thread");
    }
    stop_requested_ = true;
    finished = std::move(physics_thread_);
  }
  thread_wakeup_.notify_all();
  finished.join();
  user_paused_.store(false, std::memory_order_release);
  running_.store(false, std::memory_order_release);
}

void EnvCore::run_physics() {
  if (thread_hooks_.on_start) thread_hooks_.on_start();
  // Figures are added up here and handed to the shared statistics every kFlushSteps steps and
  // whenever the thread waits (for pacing or a pause) or ends, so that an unpaced step takes no
  // statistics lock.
  constexpr std::uint64_t kFlushSteps = 256;
  struct {
    std::uint64_t steps = 0;
    Clock::duration stepping{};
    Clock::duration elapsed{};
    double simulated = 0.0;
  } unflushed;
  const auto flush = [&] {
    record_stepping(unflushed.stepping, unflushed.simulated, unflushed.steps, unflushed.elapsed);
    unflushed = {};
  };

  auto anchor_wall = Clock::now();
  double anchor_sim = data_->time;
  bool reanchor = false;
  auto elapsed_mark = anchor_wall;  // start of the running time not yet added up
  double realtime_factor = realtime_factor_.load(std::memory_order_acquire);
  // A user pause holds the thread too, except to carry out a plugin's reset request.
  const auto held = [&] {
    return pause_requests_.load(std::memory_order_acquire) > 0 ||
           (stepping_paused() && !reset_requested());
  };
  while (!stop_requested_.load(std::memory_order_acquire)) {
    if (held()) {
      unflushed.elapsed += Clock::now() - elapsed_mark;
      flush();
      {
        std::unique_lock<std::mutex> control(thread_mutex_);
        thread_wakeup_.wait(control, [&] { return stop_requested_.load() || !held(); });
      }
      elapsed_mark = Clock::now();  // paused time is not running time
      reanchor = true;              // a reset or reload may have moved time
      continue;
    }
    double sim_time = 0.0;
    Clock::time_point step_end;
    {
      std::lock_guard<std::mutex> step_lock(step_mutex_);
      if (reset_requested()) honour_reset_request_locked();
      if (stepping_paused()) continue;  // paused since the check above: not one more step
      hooks::SteppingScope stepping(model_, data_, this);
      const auto step_start = Clock::now();
      if (reanchor) {
        anchor_wall = step_start;
        anchor_sim = data_->time;
        reanchor = false;
      }
      const double sim_start = data_->time;
      try {
        step_once_locked();
      } catch (...) {
        record_error(std::current_exception());  // nothing may end this thread but stop()
      }
      sim_time = data_->time;
      step_end = Clock::now();
      unflushed.stepping += step_end - step_start;
      if (sim_time > sim_start) unflushed.simulated += sim_time - sim_start;
      ++unflushed.steps;
    }
    if (has_pending_error()) {
      // The failed plugin is already out of the generation; the others keep running.
      try {
        rethrow_pending_error();
      } catch (...) {
        try {
          if (thread_hooks_.on_error) thread_hooks_.on_error(std::current_exception());
        } catch (...) {
          // Reporting failed too (logging raised): the error is still in the plugin's record.
        }
      }
    }
    auto now = step_end;
    if (const double target = realtime_factor_.load(std::memory_order_acquire);
        target != realtime_factor) {
      // set_realtime_factor(): the new pace counts from here, with no catch-up or lag carried,
      // and so does its measurement.
      realtime_factor = target;
      anchor_wall = now;
      anchor_sim = sim_time;
      unflushed.elapsed += now - elapsed_mark;
      elapsed_mark = now;
      flush();
      restart_measure();
    }
    if (realtime_factor > 0) {
      const auto due = anchor_wall + std::chrono::duration_cast<Clock::duration>(
                                         std::chrono::duration<double>(
                                             (sim_time - anchor_sim) / realtime_factor));
      if (now - due > kMaxPacingLag) {
        reanchor = true;
      } else if (due > now) {
        flush();  // ahead of the clock: there is time to publish the figures
        std::unique_lock<std::mutex> control(thread_mutex_);
        thread_wakeup_.wait_until(control, due, [&] {
          return stop_requested_.load() || pause_requests_.load(std::memory_order_acquire) > 0 ||
                 stepping_paused() || reset_requested() ||
                 realtime_factor_.load(std::memory_order_acquire) != realtime_factor;
        });
        now = Clock::now();
      }
    }
    unflushed.elapsed += now - elapsed_mark;
    elapsed_mark = now;
    if (unflushed.steps >= kFlushSteps) flush();
  }
  unflushed.elapsed += Clock::now() - elapsed_mark;
  flush();
  if (thread_hooks_.on_exit) thread_hooks_.on_exit();
}

void EnvCore::close() {
  if (closed_) return;
  if (host_.scope_held_by_this_thread()) {
    throw std::logic_error("close() inside an acquire_plugin() block would deadlock: leave the "
                           "block first");
  }
  stop();
  // At a step boundary, so that a step(n) running on another thread stops there (it raises
  // LogicError) instead of stepping on without plugins.
  pause();
  host_.quiesce_and_destroy();
  if (data_) hooks::unregister_pair(data_);
  closed_ = true;
  resume();
}

// ---- Simulation control (SPEC §13) -----------------------------------------------------------

void EnvCore::pause_stepping() {
  check_can_step("pause()");
  bool was_paused = false;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    was_paused = user_paused_.exchange(true, std::memory_order_acq_rel);
  }
  thread_wakeup_.notify_all();  // a pacing wait in progress ends now
  if (was_paused || !running() || pause_owner_.load() == std::this_thread::get_id()) return;
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
  if (realtime_factor && !(*realtime_factor > 0.0 && std::isfinite(*realtime_factor))) {
    throw std::invalid_argument("realtime_factor must be a positive finite number or None, got " +
                                std::to_string(*realtime_factor));
  }
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
  } catch (...) {
    record_error(std::current_exception());  // the handler reports its own; this is a backstop
  }
}

}  // namespace mjfast
