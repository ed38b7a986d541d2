// EnvCore's step loop: step(n) on the caller's thread, one step with its dispatches (the hot
// path: nothing allocated, no lock a control thread holds), the hooks' control/passive
// trampolines' targets, and the step boundary's hold (hold_steps/release_steps).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {
namespace {

using Clock = std::chrono::steady_clock;

// step() asks its interrupt poll (which takes the GIL) at most this often, and reads the clock
// often enough to notice: SPEC §18 wants Ctrl-C honoured within 100 ms.
constexpr auto kInterruptPollInterval = std::chrono::milliseconds(20);

// Decides, one comparison per step, when step() next reads the clock and maybe polls: the
// stride of steps between clock reads doubles while they come sooner than a millisecond apart
// and halves when they come later than four, so polling costs nothing measurable per step
// whatever the step's length.
class InterruptSchedule {
 public:
  bool due() {
    if (++count_ < stride_) return false;
    count_ = 0;
    const auto now = Clock::now();
    const auto since_read = now - last_read_;
    last_read_ = now;
    if (since_read < std::chrono::milliseconds(1)) {
      stride_ = std::min<std::uint64_t>(stride_ * 2, 1u << 20);
    } else if (since_read > std::chrono::milliseconds(4) && stride_ > 1) {
      stride_ /= 2;
    }
    if (now - last_poll_ < kInterruptPollInterval) return false;
    last_poll_ = now;
    return true;
  }

 private:
  std::uint64_t stride_ = 1;
  std::uint64_t count_ = 0;
  Clock::time_point last_read_ = Clock::now();
  Clock::time_point last_poll_ = last_read_;
};

// Running time over which measured_realtime_factor() is taken.
}  // namespace

template <class Dispatch>
void EnvCore::record_guarded(Dispatch&& dispatch) {
  try {
    record_error(dispatch());
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    // Nothing may unwind through MuJoCo's C frames or out of a step: a stale-generation error
    // (or anything else) is kept and thrown by the step that made this call.
    record_error(std::current_exception());
  }
}

template <class Dispatch>
void EnvCore::dispatch_guarded(Dispatch&& dispatch) {
  hooks::DispatchScope dispatching(this);
  record_guarded(std::forward<Dispatch>(dispatch));
}
void EnvCore::check_can_step(const char* what) const {
  check_open(what);
  using call_context::Refusal;
  if (call_context::in_callback_of(this)) call_context::refuse(Refusal::kPluginCallback, what);
  if (holds_steps()) call_context::refuse(Refusal::kStepHold, what);
  if (host_.scope_held_by_this_thread()) call_context::refuse(Refusal::kAcquireBlock, what);
}

void EnvCore::step_once_locked(bool& simulation_failed, std::string& simulation_error) {
  const ModelGeneration generation = model_generation();
  if (step_recorder_ && step_recorder_->replaying()) {
    control_.drop_staged();
  } else if (control_.apply_staged(data_) && step_recorder_) {
    step_recorder_->commands_applied(model_, data_, control_.applied_fields(), generation.value());
  }
  // One host lock for the whole step instead of one per dispatch (the per-step cost of native
  // plugins is otherwise dominated by the four lock/unlock pairs); skipped with no plugins. It is
  // the physics side's mutex: a control thread's update_read/update_write never waits on it.
  std::optional<PluginHost::StepLock> host_lock;
  if (host_.has_any_callback()) host_lock.emplace(host_);
  if (host_.has_callback(Callback::kPreStep)) {
    dispatch_guarded([&] { return host_.dispatch_pre_step(generation, model_, data_); });
  }
  if (!mujoco_guard::step(model_, data_, simulation_error)) {
    // MuJoCo gave up inside mj_step: the data is undefined, so nothing else of this step runs.
    simulation_failed = true;
    return;
  }
  step_count_.store(step_count_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (host_.has_callback(Callback::kLastStage)) {
    dispatch_guarded([&] { return host_.dispatch_last_stage(generation, model_, data_); });
  }
  control_.publish(data_);
  // The render turn: one predictable comparison per step while no camera is due. The host lock
  // is not held across it (render_sync waits for the render thread there).
  if (render_->due(data_->time)) {
    host_lock.reset();
    record_guarded([&] { return render_->after_step(model_, data_, generation); });
  }
  if (step_recorder_) step_recorder_->after_step(model_, data_, step_count(), generation.value());
}

bool EnvCore::step_once_checked() {
  // Two loads and compares: without our hooks, plugins would silently stop being called.
  if (!hooks::control_owned() || !hooks::passive_owned()) {
    try {
      hooks::check_owned();
    } catch (...) {
      record_fault(std::current_exception());
    }
    return false;
  }
  bool simulation_failed = false;
  std::string simulation_error;
  step_once_locked(simulation_failed, simulation_error);
  if (simulation_failed) {
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      simulation_error_ = simulation_error;
    }
    simulation_invalid_.store(true, std::memory_order_release);
    record_fault(std::make_exception_ptr(SimulationError(
        "MuJoCo error in mj_step at time " + std::to_string(data_->time) + ": " + simulation_error +
        " (the simulation state is undefined until env.reset())")));
    return false;
  }
  return true;
}

std::unique_lock<std::mutex> EnvCore::lock_for_step() {
  std::unique_lock<std::mutex> lock(step_mutex_, std::defer_lock);
  if (!hooks::in_dispatch()) {
    lock.lock();
  } else if (!lock.try_lock()) {
    call_context::refuse(call_context::Refusal::kBusyEnvFromCallback, "step()");
  }
  return lock;
}

void EnvCore::step(std::int64_t n, const InterruptPoll* interrupted) {
  if (n < 0) throw std::invalid_argument("step(n) needs n >= 0, got " + std::to_string(n));
  check_can_step("step()");
  physics_.join_ended();
  raise_fault_if_any();
  if (running() && !stepping_paused()) {
    throw std::logic_error("step() while the physics thread runs: call pause() or stop() first");
  }
  hooks::check_owned();
  if (n == 0) return;
  // Counted before the lock is taken and checked against start() after (see step_calls_).
  step_calls_.fetch_add(1);
  struct Uncount {
    std::atomic<int>& calls;
    ~Uncount() { calls.fetch_sub(1); }
  } uncount{step_calls_};
  if (running() && !stepping_paused()) {
    throw std::logic_error("step() while the physics thread runs: call pause() or stop() first");
  }
  std::unique_lock<std::mutex> lock = lock_for_step();
  if (closed_) throw std::logic_error("step() on a closed env");  // closed while we waited
  raise_fault_if_any();  // a reset/reload in between may have left one
  InterruptSchedule interrupt_schedule;
  std::exception_ptr interrupt;
  bool faulted = false;
  std::int64_t done = 0;
  while (done < n) {
    // One stretch of steps, until done or until reset/reload/a geometry edit asks to pause:
    // they run at the next step boundary, not after the whole step(n).
    {
      hooks::SteppingScope stepping(model_, data_, this);
      const mujoco_guard::Scope guard;  // MuJoCo errors of this stretch are raised, not fatal
      const auto wall_start = Clock::now();
      const double sim_start = data_->time;
      std::uint64_t stretch = 0;
      while (done < n && hold_requests_.load(std::memory_order_acquire) == 0) {
        if (reset_requested()) carry_out_reset_request_locked();
        if (!step_once_checked()) {
          faulted = true;
          break;
        }
        ++done;
        ++stretch;
        if (has_pending_error()) break;
        if (interrupted && interrupt_schedule.due() && (interrupt = (*interrupted)())) break;
      }
      const auto wall = Clock::now() - wall_start;
      record_stepping(wall, data_->time - sim_start, stretch, wall);
    }
    if (faulted || interrupt || has_pending_error()) break;
    if (done < n) {
      lock.unlock();
      physics_.wait_for([&] { return hold_requests_.load() == 0; });
      lock.lock();
      if (closed_) throw std::logic_error("the env was closed during step()");
    }
  }
  lock.unlock();
  if (faulted) raise_fault_if_any();
  if (has_pending_error()) rethrow_pending_error();  // a plugin's error outranks an interrupt
  if (interrupt) throw Interrupted(interrupt);
}

void EnvCore::on_control(const mjModel* m, mjData* d) {
  // Inside this thread's acquire_plugin block no dispatch may run (SPEC §6): MuJoCo's own call
  // proceeds without plugins.
  if (!host_.has_callback(Callback::kControl) || host_.scope_held_by_this_thread()) return;
  dispatch_guarded([&] { return host_.dispatch_control(model_generation(), m, d); });
}

void EnvCore::on_passive(const mjModel* m, mjData* d) {
  if (!host_.has_callback(Callback::kPassive) || host_.scope_held_by_this_thread()) return;
  dispatch_guarded([&] { return host_.dispatch_passive(model_generation(), m, d); });
}
void EnvCore::hold_steps() {
  const auto me = std::this_thread::get_id();
  if (hold_owner_.load() == me) {
    ++hold_depth_;
    return;
  }
  check_can_step("holding the env's steps");
  hold_requests_.fetch_add(1, std::memory_order_acq_rel);
  step_mutex_.lock();
  hold_owner_.store(me);
  hold_depth_ = 1;
}

void EnvCore::release_steps() {
  if (hold_owner_.load() != std::this_thread::get_id()) {
    throw std::logic_error("release_steps() from a thread that does not hold the env's steps");
  }
  if (--hold_depth_ > 0) return;
  hold_owner_.store(std::thread::id{});
  step_mutex_.unlock();
  physics_.signal([&] { hold_requests_.fetch_sub(1, std::memory_order_acq_rel); });
}

}  // namespace mjfast
