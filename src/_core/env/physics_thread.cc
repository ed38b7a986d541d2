// The physics thread (physics_thread.h): its loop and step budget, the Pacer that holds it to a
// real-time factor, the StatisticsTally that hands its figures over without a lock per step, and
// the waits for its end.
#include "env/physics_thread.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"

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

// The physics thread's pace at a real-time factor: when the next step is due. Simulated time is
// measured from an anchor (a wall time and the simulated time then), so that rounding does not
// add up over steps. The first step anchors it.
class PhysicsThread::Pacer {
 public:
  explicit Pacer(double factor) : factor_(factor) {}

  double factor() const { return factor_; }
  // Anchors again at the start of the next step (after a pause or a stall).
  void reanchor() { reanchor_ = true; }
  void step_started(Clock::time_point when, double sim_time) {
    if (!reanchor_) return;
    anchor(when, sim_time);
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
  double anchor_sim_ = 0.0;
  bool reanchor_ = true;
};

// The physics thread's figures not yet added to the target's statistics: handed over every
// kFlushSteps steps and whenever the thread waits (for pacing or a pause) or ends, so that an
// unpaced step takes no statistics lock.
class PhysicsThread::StatisticsTally {
 public:
  StatisticsTally(SteppingTarget& target, Clock::time_point now)
      : target_(target), running_since_(now) {}

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
    target_.record_stepping(stepping_, simulated_, steps_, elapsed_);
    stepping_ = elapsed_ = Clock::duration{};
    simulated_ = 0.0;
    steps_ = 0;
  }
  void flush_if_due() {
    constexpr std::uint64_t kFlushSteps = 256;
    if (steps_ >= kFlushSteps) flush();
  }

 private:
  SteppingTarget& target_;
  Clock::time_point running_since_;  // start of the running time not yet added up
  std::uint64_t steps_ = 0;
  Clock::duration stepping_{};
  Clock::duration elapsed_{};
  double simulated_ = 0.0;
};

PhysicsThread::~PhysicsThread() {
  try {
    stop();
  } catch (...) {
    // Only refused on the thread itself, which never destroys its own owner.
  }
}

void PhysicsThread::start(SteppingTarget& target, std::optional<double> realtime_factor,
                          std::optional<std::uint64_t> max_steps,
                          const std::function<void()>& refuse) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_.load()) throw std::logic_error("start() while the physics thread already runs");
  running_.store(true);
  try {
    refuse();
  } catch (...) {
    running_.store(false);
    throw;
  }
  stop_requested_ = false;
  realtime_factor_.store(realtime_factor.value_or(0.0), std::memory_order_release);
  step_budget_ = max_steps;
  thread_ = std::thread([this, &target] { run(target); });
}

void PhysicsThread::join_ended() {
  std::thread ended;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // A thread that ended by itself (a fault, its step budget) cleared running_ on its way out.
    if (!thread_.joinable() || running_.load()) return;
    if (thread_.get_id() == std::this_thread::get_id()) return;
    ended = std::move(thread_);
  }
  ended.join();
}

bool PhysicsThread::stop() {
  std::thread finished;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) return false;
    if (thread_.get_id() == std::this_thread::get_id()) {
      call_context::refuse(call_context::Refusal::kPhysicsThread, "stop()");
    }
    stop_requested_ = true;
    finished = std::move(thread_);
  }
  wakeup_.notify_all();
  finished.join();
  end();
  return true;
}

void PhysicsThread::check_timeout(std::optional<double> timeout_s) {
  if (timeout_s && !(*timeout_s >= 0.0)) {  // NaN included
    char text[32];
    std::snprintf(text, sizeof(text), "%g", *timeout_s);
    throw std::invalid_argument(
        std::string("wait(timeout) takes None or a number of seconds >= 0, got ") + text);
  }
}

bool PhysicsThread::wait(std::optional<double> timeout_s, const InterruptPoll* interrupted) {
  check_timeout(timeout_s);
  const auto stopped = [&] { return !running_.load(std::memory_order_acquire); };
  // No deadline past kFarFuture (the conversion to clock ticks would overflow): as good as none.
  std::optional<Clock::time_point> deadline;
  if (timeout_s && *timeout_s < kFarFuture.count()) {
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(*timeout_s));
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (thread_.get_id() == std::this_thread::get_id()) {
    call_context::refuse(call_context::Refusal::kPhysicsThread, "wait()");
  }
  while (!stopped()) {
    if (!interrupted && !deadline) {
      ended_.wait(lock, stopped);
      break;
    }
    Clock::time_point until = deadline.value_or(Clock::time_point::max());
    if (interrupted) until = std::min(until, Clock::now() + kInterruptPollInterval);
    if (ended_.wait_until(lock, until, stopped)) break;
    if (deadline && Clock::now() >= *deadline) return false;
    lock.unlock();  // the poll takes the GIL: no lock of ours held meanwhile
    if (const std::exception_ptr interrupt = (*interrupted)()) throw Interrupted(interrupt);
    lock.lock();
  }
  return true;
}

void PhysicsThread::run(SteppingTarget& target) {
  target.thread_started();
  const mujoco_guard::Scope guard;  // MuJoCo errors on this thread are raised, not fatal
  StatisticsTally tally(target, Clock::now());
  Pacer pacer(realtime_factor_.load(std::memory_order_acquire));
  // Counted down per step this thread runs (nullopt: no budget); none left ends the thread.
  std::optional<std::uint64_t> steps_left = step_budget_;
  const auto budget_spent = [&] { return steps_left && *steps_left == 0; };
  bool faulted = false;
  while (!stop_requested_.load(std::memory_order_acquire) && !budget_spent()) {
    if (target.held()) {
      tally.run_until(Clock::now());
      tally.flush();
      wait_while_held(target);
      tally.resume_at(Clock::now());
      pacer.reanchor();  // a reset or reload may have moved time
      continue;
    }
    const std::optional<SteppingTarget::Step> step = target.step_at_boundary();
    if (!step) continue;  // paused since the check above: not one more step
    if (steps_left) --*steps_left;
    tally.add_step(step->end - step->start, step->sim_start, step->sim_end);
    if (step->faulted) {
      faulted = true;
      break;
    }
    if (!target.after_step()) break;
    pacer.step_started(step->start, step->sim_start);
    pace(target, pacer, tally, step->sim_end, step->end);
  }
  tally.run_until(Clock::now());
  tally.flush();
  // Ended by a fault, not by stop(): the target says so now (the next step/stop/start raises
  // it); ended by its budget: as if stopped after the last step (wait() returns, start() joins).
  if (target.report_fault() || faulted || budget_spent()) end();
  target.thread_ending();
}

void PhysicsThread::wait_while_held(const SteppingTarget& target) {
  std::unique_lock<std::mutex> lock(mutex_);
  wakeup_.wait(lock, [&] { return stop_requested_.load() || !target.held(); });
}

void PhysicsThread::pace(SteppingTarget& target, Pacer& pacer, StatisticsTally& tally,
                         double sim_time, Clock::time_point now) {
  if (const double factor = realtime_factor(); factor != pacer.factor()) {
    // set_realtime_factor(): its measurement starts here too.
    pacer.change_factor(factor, now, sim_time);
    tally.run_until(now);
    tally.flush();
    target.restart_measure();
  }
  if (const std::optional<Clock::time_point> due = pacer.wait_until(now, sim_time)) {
    tally.flush();  // ahead of the clock: there is time to publish the figures
    wait_for_pace(target, *due, pacer.factor());
    now = Clock::now();
  }
  tally.run_until(now);
  tally.flush_if_due();
}

void PhysicsThread::wait_for_pace(const SteppingTarget& target, Clock::time_point due,
                                  double factor) {
  std::unique_lock<std::mutex> lock(mutex_);
  wakeup_.wait_until(lock, due, [&] {
    return stop_requested_.load() || target.boundary_due() || realtime_factor() != factor;
  });
}

void PhysicsThread::end() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_.store(false, std::memory_order_release);
  }
  ended_.notify_all();
}

}  // namespace mjfast
