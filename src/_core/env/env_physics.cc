// EnvCore and its physics thread: start(), stop() and wait() with the env's refusals, and the
// env's side of the thread's narrow stepping interface (SteppingTarget, env/physics_thread.h):
// one step at a step boundary, the plugin errors and the fault the thread hands on, the held
// state it waits on. The thread's loop, pace and figures are PhysicsThread's own.
#include <stdexcept>
#include <string>

#include "common/call_context.h"
#include "common/errors.h"
#include "env/env_core.h"

namespace mjfast {

void EnvCore::start(std::optional<double> realtime_factor, std::optional<std::uint64_t> max_steps) {
  check_can_step("start()");
  checked_realtime_factor(realtime_factor);
  physics_.join_ended();
  raise_fault_if_any();
  hooks::check_owned();
  // step_calls_: step() checks running() after counting itself, start() the count once running.
  physics_.start(*this, realtime_factor, max_steps, [&] {
    if (step_calls_.load() > 0) {
      throw std::logic_error(
          "start() while another thread is inside step(): wait for it to return first");
    }
  });
}

void EnvCore::stop() {
  stop_thread();
  // What stopped the thread by itself (a MuJoCo error, lost hooks) is raised once, here or by the
  // next step()/start().
  // Stopping is allowed with the data undefined: only a fault not raised yet is.
  if (fault_pending_.load(std::memory_order_acquire)) raise_fault_if_any(false);
}

void EnvCore::stop_thread() {
  physics_.stop();
  // stop() clears the user's pause too, a pending one included.
  physics_.signal([&] { user_paused_.store(false, std::memory_order_release); });
}

bool EnvCore::wait(std::optional<double> timeout_s, const InterruptPoll* interrupted) {
  PhysicsThread::check_timeout(timeout_s);
  using call_context::Refusal;
  if (call_context::in_callback_of(this)) call_context::refuse(Refusal::kPluginCallback, "wait()");
  if (host_.held_by_this_thread()) call_context::refuse(Refusal::kOwnCallback, "wait()");
  if (holds_steps()) call_context::refuse(Refusal::kStepHold, "wait()");
  if (host_.scope_held_by_this_thread()) call_context::refuse(Refusal::kAcquireBlock, "wait()");
  return physics_.wait(timeout_s, interrupted);
}

// ---- SteppingTarget: what the physics thread calls --------------------------------------------

void EnvCore::thread_started() {
  if (thread_hooks_.on_start) thread_hooks_.on_start();
}

void EnvCore::thread_ending() {
  if (thread_hooks_.on_exit) thread_hooks_.on_exit();
}

bool EnvCore::held() const {
  // A user pause holds the thread too, except to carry out a plugin's reset request.
  return hold_requests_.load(std::memory_order_acquire) > 0 ||
         (stepping_paused() && !reset_requested());
}

bool EnvCore::boundary_due() const {
  return hold_requests_.load(std::memory_order_acquire) > 0 || stepping_paused() ||
         reset_requested();
}

std::optional<SteppingTarget::Step> EnvCore::step_at_boundary() {
  std::lock_guard<std::mutex> step_lock(step_mutex_);
  if (reset_requested()) carry_out_reset_request_locked();
  if (stepping_paused()) return std::nullopt;
  hooks::SteppingScope stepping(model_, data_, this);
  Step step{};
  step.start = Clock::now();
  step.sim_start = data_->time;
  try {
    step.faulted = !step_once_checked();
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    record_error(std::current_exception());  // nothing but stop() or a fault ends it
  }
  step.sim_end = data_->time;
  step.end = Clock::now();
  return step;
}

bool EnvCore::after_step() {
  if (!has_pending_error()) return true;
  // The failed plugin is already out of the generation; the others keep running.
  try {
    rethrow_pending_error();
  } catch (const Interrupted&) {
    // A plugin raised SystemExit or KeyboardInterrupt here: not its failure, but nobody on
    // this thread can take it, so the thread stops and the next step/stop/start raises it.
    record_fault(std::current_exception());
    return false;
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    // Reporting may fail too (logging raised): the error is still in the plugin's record.
    report_quietly(std::current_exception());
  }
  return true;
}

bool EnvCore::report_fault() {
  // Ended by a fault, not by stop(): say so now (the next step/stop/start raises it).
  if (!fault_pending_.load(std::memory_order_acquire)) return false;
  std::exception_ptr fault;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    fault = fault_;
  }
  report_quietly(fault);
  return true;
}

void EnvCore::report_quietly(std::exception_ptr error) {
  try {
    if (error && thread_hooks_.on_error) thread_hooks_.on_error(error);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
  }
}

}  // namespace mjfast
