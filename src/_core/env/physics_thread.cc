// EnvCore's physics thread (start()/stop()/wait()): its loop and step budget, the Pacer that
// holds it to a real-time factor, the StatisticsTally that hands its figures over without a lock
// per step, and the figures themselves.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {
namespace {

using Clock = std::chrono::steady_clock;

// After a stall longer than this (a slow plugin, a debugger), the pacing re-anchors instead of
// running flat out to catch up.
constexpr auto kMaxPacingLag = std::chrono::milliseconds(100);
// The furthest a paced step may be due from its anchor and still get a deadline: 100 years, far
// inside the 292 years of the steady clock's nanosecond ticks (see Pacer::wait_until).
constexpr std::chrono::duration<double> kFarFuture{100.0 * 365.25 * 24 * 3600};
// wait() on the main thread asks its interrupt poll (which takes the GIL) this often: SPEC §18
// wants Ctrl-C honoured within 100 ms. The wait itself ends when the thread does.
constexpr auto kInterruptPollInterval = std::chrono::milliseconds(20);

}  // namespace

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

void EnvCore::start(std::optional<double> realtime_factor, std::optional<std::uint64_t> max_steps) {
  check_can_step("start()");
  checked_realtime_factor(realtime_factor);
  join_ended_thread();
  raise_fault_if_any();
  hooks::check_owned();
  std::lock_guard<std::mutex> lock(thread_mutex_);
  if (running_.load()) throw std::logic_error("start() while the physics thread already runs");
  running_.store(true);
  if (step_calls_.load() > 0) {  // see step_calls_: step() checks running_ after counting itself
    running_.store(false);
    throw std::logic_error(
        "start() while another thread is inside step(): wait for it to "
        "return first");
  }
  stop_requested_ = false;
  realtime_factor_.store(realtime_factor.value_or(0.0), std::memory_order_release);
  step_budget_ = max_steps;
  physics_thread_ = std::thread([this] { run_physics(); });
}

void EnvCore::join_ended_thread() {
  std::thread ended;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    // A thread that ended by itself (a fault, its step budget) cleared running_ on its way out.
    if (!physics_thread_.joinable() || running_.load()) return;
    if (physics_thread_.get_id() == std::this_thread::get_id()) return;
    ended = std::move(physics_thread_);
  }
  ended.join();
}

void EnvCore::stop() {
  stop_thread();
  // What stopped the thread by itself (a MuJoCo error, lost hooks) is raised once, here or by the
  // next step()/start().
  // Stopping is allowed with the data undefined: only a fault not raised yet is.
  if (fault_pending_.load(std::memory_order_acquire)) raise_fault_if_any(false);
}

void EnvCore::stop_thread() {
  std::thread finished;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    if (!physics_thread_.joinable()) {
      user_paused_.store(false, std::memory_order_release);  // stop() clears a pending pause too
      return;
    }
    if (physics_thread_.get_id() == std::this_thread::get_id()) {
      call_context::refuse(call_context::Refusal::kPhysicsThread, "stop()");
    }
    stop_requested_ = true;
    finished = std::move(physics_thread_);
  }
  thread_wakeup_.notify_all();
  finished.join();
  user_paused_.store(false, std::memory_order_release);
  end_thread();
}

bool EnvCore::wait(std::optional<double> timeout_s, const InterruptPoll* interrupted) {
  if (timeout_s && !(*timeout_s >= 0.0)) {  // NaN included
    char text[32];
    std::snprintf(text, sizeof(text), "%g", *timeout_s);
    throw std::invalid_argument(
        std::string("wait(timeout) takes None or a number of seconds >= 0, got ") + text);
  }
  using call_context::Refusal;
  if (call_context::in_callback_of(this)) call_context::refuse(Refusal::kPluginCallback, "wait()");
  if (host_.held_by_this_thread()) call_context::refuse(Refusal::kOwnCallback, "wait()");
  if (holds_steps()) call_context::refuse(Refusal::kStepHold, "wait()");
  if (host_.scope_held_by_this_thread()) call_context::refuse(Refusal::kAcquireBlock, "wait()");
  const auto stopped = [&] { return !running_.load(std::memory_order_acquire); };
  // No deadline past kFarFuture (the conversion to clock ticks would overflow): as good as none.
  std::optional<Clock::time_point> deadline;
  if (timeout_s && *timeout_s < kFarFuture.count()) {
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(*timeout_s));
  }
  std::unique_lock<std::mutex> lock(thread_mutex_);
  if (physics_thread_.get_id() == std::this_thread::get_id()) {
    call_context::refuse(Refusal::kPhysicsThread, "wait()");
  }
  while (!stopped()) {
    if (!interrupted && !deadline) {
      thread_ended_.wait(lock, stopped);
      break;
    }
    Clock::time_point until = deadline.value_or(Clock::time_point::max());
    if (interrupted) until = std::min(until, Clock::now() + kInterruptPollInterval);
    if (thread_ended_.wait_until(lock, until, stopped)) break;
    if (deadline && Clock::now() >= *deadline) return false;
    lock.unlock();  // the poll takes the GIL: no lock of ours held meanwhile
    if (const std::exception_ptr interrupt = (*interrupted)()) throw Interrupted(interrupt);
    lock.lock();
  }
  return true;
}

// The physics thread's pace at a real-time factor: when the next step is due. Simulated time is
// measured from an anchor (a wall time and the simulated time then), so that rounding does not
// add up over steps.
class EnvCore::Pacer {
 public:
  Pacer(double factor, Clock::time_point now, double sim_time)
      : factor_(factor), anchor_wall_(now), anchor_sim_(sim_time) {}

  double factor() const { return factor_; }
  // Anchors again at the start of the next step (after a pause or a stall).
  void reanchor() { reanchor_ = true; }
  void step_starts(Clock::time_point now, double sim_time) {
    if (!reanchor_) return;
    anchor(now, sim_time);
    reanchor_ = false;
  }
  // set_realtime_factor(): the new pace counts from here, with no catch-up or lag carried.
  void change_factor(double factor, Clock::time_point now, double sim_time) {
    factor_ = factor;
    anchor(now, sim_time);
  }
  // When the step that reached `sim_time` at `now` lets the next one start, if later than now.
  // Unpaced, or behind: none (further behind than kMaxPacingLag, the next step re-anchors
  // instead of running flat out to catch up).
  // A pace so slow that the next step is due further out than kFarFuture (a factor of 1e-14
  // makes one 2 ms step last 6 years) waits without a deadline, until stop, a pause, a reset
  // request or a new factor wakes it (wait_for_pace): the conversion to clock ticks would
  // overflow.
  std::optional<Clock::time_point> wait_until(Clock::time_point now, double sim_time) {
    if (factor_ <= 0) return std::nullopt;
    const double ahead_s = (sim_time - anchor_sim_) / factor_;
    if (ahead_s >= kFarFuture.count()) return Clock::time_point::max();
    if (!(ahead_s > -kFarFuture.count())) {  // time jumped far back, or NaN: start afresh
      reanchor_ = true;
      return std::nullopt;
    }
    const auto due = anchor_wall_ + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(ahead_s));
    if (now - due > kMaxPacingLag) {
      reanchor_ = true;
      return std::nullopt;
    }
    if (due > now) return due;
    return std::nullopt;
  }

 private:
  void anchor(Clock::time_point now, double sim_time) {
    anchor_wall_ = now;
    anchor_sim_ = sim_time;
  }

  double factor_;
  Clock::time_point anchor_wall_;
  double anchor_sim_;
  bool reanchor_ = false;
};

// The physics thread's figures not yet added to the shared statistics: handed over every
// kFlushSteps steps and whenever the thread waits (for pacing or a pause) or ends, so that an
// unpaced step takes no statistics lock.
class EnvCore::StatisticsTally {
 public:
  StatisticsTally(EnvCore& env, Clock::time_point now) : env_(env), running_since_(now) {}

  void add_step(Clock::duration wall, double sim_start, double sim_end) {
    stepping_ += wall;
    if (sim_end > sim_start) simulated_ += sim_end - sim_start;
    ++steps_;
  }
  // Counts the running time (stepping and pacing waits) up to `now`.
  void run_until(Clock::time_point now) {
    elapsed_ += now - running_since_;
    running_since_ = now;
  }
  // Running time starts again at `now`: paused time is not running time.
  void resume_at(Clock::time_point now) { running_since_ = now; }
  void flush() {
    env_.record_stepping(stepping_, simulated_, steps_, elapsed_);
    stepping_ = elapsed_ = Clock::duration{};
    simulated_ = 0.0;
    steps_ = 0;
  }
  void flush_if_due() {
    constexpr std::uint64_t kFlushSteps = 256;
    if (steps_ >= kFlushSteps) flush();
  }

 private:
  EnvCore& env_;
  Clock::time_point running_since_;  // start of the running time not yet added up
  std::uint64_t steps_ = 0;
  Clock::duration stepping_{};
  Clock::duration elapsed_{};
  double simulated_ = 0.0;
};

void EnvCore::run_physics() {
  if (thread_hooks_.on_start) thread_hooks_.on_start();
  const mujoco_guard::Scope guard;  // MuJoCo errors on this thread are raised, not fatal
  const auto start = Clock::now();
  StatisticsTally tally(*this, start);
  Pacer pacer(realtime_factor_.load(std::memory_order_acquire), start, data_->time);
  // Counted down per step this thread runs (nullopt: no budget); none left ends the thread.
  std::optional<std::uint64_t> steps_left = step_budget_;
  const auto budget_spent = [&] { return steps_left && *steps_left == 0; };
  bool faulted = false;
  while (!stop_requested_.load(std::memory_order_acquire) && !budget_spent()) {
    if (physics_held()) {
      tally.run_until(Clock::now());
      tally.flush();
      wait_while_held();
      tally.resume_at(Clock::now());
      pacer.reanchor();  // a reset or reload may have moved time
      continue;
    }
    const std::optional<PhysicsStep> step = physics_step(pacer, tally);
    if (!step) continue;  // paused since the check above: not one more step
    if (steps_left) --*steps_left;
    if (step->faulted) {
      faulted = true;
      break;
    }
    if (has_pending_error() && !report_plugin_error()) break;
    pace(pacer, tally, step->sim_time, step->end);
  }
  tally.run_until(Clock::now());
  tally.flush();
  if (faulted || fault_pending_.load(std::memory_order_acquire)) {
    end_on_fault();
  } else if (budget_spent()) {
    end_thread();  // as if stopped after the last step: wait() returns, start() joins it
  }
  if (thread_hooks_.on_exit) thread_hooks_.on_exit();
}

bool EnvCore::physics_held() const {
  // A user pause holds the thread too, except to carry out a plugin's reset request.
  return hold_requests_.load(std::memory_order_acquire) > 0 ||
         (stepping_paused() && !reset_requested());
}

void EnvCore::wait_while_held() {
  std::unique_lock<std::mutex> lock(thread_mutex_);
  thread_wakeup_.wait(lock, [&] { return stop_requested_.load() || !physics_held(); });
}

std::optional<EnvCore::PhysicsStep> EnvCore::physics_step(Pacer& pacer, StatisticsTally& tally) {
  std::lock_guard<std::mutex> step_lock(step_mutex_);
  if (reset_requested()) carry_out_reset_request_locked();
  if (stepping_paused()) return std::nullopt;
  hooks::SteppingScope stepping(model_, data_, this);
  const auto step_start = Clock::now();
  pacer.step_starts(step_start, data_->time);
  const double sim_start = data_->time;
  bool faulted = false;
  try {
    faulted = !step_once_checked();
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    record_error(std::current_exception());  // nothing but stop() or a fault ends it
  }
  const PhysicsStep step{data_->time, Clock::now(), faulted};
  tally.add_step(step.end - step_start, sim_start, step.sim_time);
  return step;
}

bool EnvCore::report_plugin_error() {
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

void EnvCore::report_quietly(std::exception_ptr error) {
  try {
    if (error && thread_hooks_.on_error) thread_hooks_.on_error(error);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
  }
}

void EnvCore::pace(Pacer& pacer, StatisticsTally& tally, double sim_time, Clock::time_point now) {
  if (const double target = realtime_factor_.load(std::memory_order_acquire);
      target != pacer.factor()) {
    // set_realtime_factor(): its measurement starts here too.
    pacer.change_factor(target, now, sim_time);
    tally.run_until(now);
    tally.flush();
    restart_measure();
  }
  if (const std::optional<Clock::time_point> due = pacer.wait_until(now, sim_time)) {
    tally.flush();  // ahead of the clock: there is time to publish the figures
    wait_for_pace(*due, pacer.factor());
    now = Clock::now();
  }
  tally.run_until(now);
  tally.flush_if_due();
}

void EnvCore::wait_for_pace(Clock::time_point due, double factor) {
  std::unique_lock<std::mutex> lock(thread_mutex_);
  thread_wakeup_.wait_until(lock, due, [&] {
    return stop_requested_.load() || hold_requests_.load(std::memory_order_acquire) > 0 ||
           stepping_paused() || reset_requested() ||
           realtime_factor_.load(std::memory_order_acquire) != factor;
  });
}

void EnvCore::end_on_fault() {
  // Ended by a fault, not by stop(): say so now (the next step/stop/start raises it).
  std::exception_ptr fault;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    fault = fault_;
  }
  report_quietly(fault);
  end_thread();
}

void EnvCore::end_thread() {
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    running_.store(false, std::memory_order_release);
  }
  thread_ended_.notify_all();
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

}  // namespace mjfast
