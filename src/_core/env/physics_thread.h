// PhysicsThread: the thread that steps an env on its own (env.start()): its loop and step
// budget, the Pacer that holds it to a real-time factor, and the StatisticsTally that hands its
// figures over without a lock per step. It sees its env only through SteppingTarget, the narrow
// stepping interface below (EnvCore implements it), and knows nothing of plugins, MuJoCo's data
// or Python.
//
// Its mutex_ (EnvCore's order, env/env_core.h: a leaf) guards the thread's lifecycle and every
// wait of a stepping thread for a step boundary: this thread's waits (while held, and for its
// pace) and a step(n) caller's wait for a step hold to end. Whatever those waits look at changes
// through signal(), under the mutex, so that no wait misses it; it is never held across a step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace mjfast {

// What the physics thread steps and reports to: the narrow face of its env.
class SteppingTarget {
 public:
  using Clock = std::chrono::steady_clock;
  struct Step {
    Clock::time_point start;  // when it started (after the step boundary's own work)
    Clock::time_point end;
    double sim_start;  // simulated time at its start and at its end
    double sim_end;
    bool faulted;  // a fault ended stepping (recorded by the target)
  };

  virtual ~SteppingTarget() = default;
  // On the physics thread as it starts and as it ends (the bindings attach it to Python).
  virtual void thread_started() = 0;
  virtual void thread_ending() = 0;
  // Whether the thread must wait before its next step (a step hold, the user's pause).
  virtual bool held() const = 0;
  // Whether a pacing wait ends early: held(), or work due at the next step boundary (a plugin's
  // reset request, which a paused env carries out too).
  virtual bool boundary_due() const = 0;
  // One step at a step boundary; none where the user paused since held() was asked.
  virtual std::optional<Step> step_at_boundary() = 0;
  // After a step: hands on the plugin error it left, if any; false where the thread must end
  // (the error was an interrupt, now a fault).
  virtual bool after_step() = 0;
  // As the thread ends: reports the fault that ended stepping, if one is recorded; whether one is.
  virtual bool report_fault() = 0;
  // The figures: `wall` spent stepping `steps` steps that advanced `simulated` seconds, and
  // `elapsed` wall time (stepping plus pacing waits) during which the thread ran.
  virtual void record_stepping(Clock::duration wall, double simulated, std::uint64_t steps,
                               Clock::duration elapsed) = 0;
  // The thread has taken a new real-time factor: its measurement starts again.
  virtual void restart_measure() = 0;
};

class PhysicsThread {
 public:
  using Clock = std::chrono::steady_clock;
  // Polled by wait() on the main thread: null, or what interrupts the wait (Ctrl-C).
  using InterruptPoll = std::function<std::exception_ptr()>;

  PhysicsThread() = default;
  ~PhysicsThread();  // stops and joins a thread still there
  PhysicsThread(const PhysicsThread&) = delete;
  PhysicsThread& operator=(const PhysicsThread&) = delete;

  // Starts the thread stepping `target`, paced at `realtime_factor` (nullopt: unbounded), for at
  // most `max_steps` of its own steps (nullopt: until stop()). `refuse` runs once the thread is
  // claimed, before it begins, under mutex_: what it throws leaves the thread unstarted (the
  // env's check that no step(n) call is in progress, whose counterpart reads running()).
  // std::logic_error while a thread runs.
  void start(SteppingTarget& target, std::optional<double> realtime_factor,
             std::optional<std::uint64_t> max_steps, const std::function<void()>& refuse);
  // Stops and joins the thread; false if there was none. Refused on the thread itself.
  bool stop();
  // Joins a thread that ended by itself (a fault, its step budget), from any other thread.
  void join_ended();
  bool running() const { return running_.load(std::memory_order_acquire); }
  // Waits until the thread is not running or `timeout_s` seconds have passed (nullopt: no
  // limit); true once it is not running. With `interrupted`, asks that poll every 20 ms (SPEC
  // §18: Ctrl-C within 100 ms) with no lock held, and throws Interrupted with what it returns.
  // std::invalid_argument for a negative or NaN timeout; refused on the thread itself.
  bool wait(std::optional<double> timeout_s, const InterruptPoll* interrupted);
  // wait()'s check of its timeout, for a caller that checks it before its own refusals.
  static void check_timeout(std::optional<double> timeout_s);

  // The target pace (<= 0: unbounded), read by the thread after each step; set_realtime_factor()
  // wakes a pacing wait so that the new pace counts at once.
  double realtime_factor() const { return realtime_factor_.load(std::memory_order_acquire); }
  void set_realtime_factor(double factor) {
    signal([&] { realtime_factor_.store(factor, std::memory_order_release); });
  }

  // Makes `change` (to what the stepping threads' waits look at: a hold, a pause, a reset
  // request) under mutex_, then wakes every wait.
  template <class Change>
  void signal(Change&& change) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      change();
    }
    wakeup_.notify_all();
  }
  // Waits, on a thread stepping the env in step(n), until `ready` (a step hold released).
  template <class Ready>
  void wait_for(Ready&& ready) {
    std::unique_lock<std::mutex> lock(mutex_);
    wakeup_.wait(lock, std::forward<Ready>(ready));
  }

 private:
  class Pacer;
  class StatisticsTally;
  void run(SteppingTarget& target);
  void wait_while_held(const SteppingTarget& target);
  // After a step that reached `sim_time` at `now`: takes a new real-time factor, waits until
  // the next step is due, and counts the running time.
  void pace(SteppingTarget& target, Pacer& pacer, StatisticsTally& tally, double sim_time,
            Clock::time_point now);
  void wait_for_pace(const SteppingTarget& target, Clock::time_point due, double factor);
  // Not running any more: clears running_ and wakes wait().
  void end();

  mutable std::mutex mutex_;
  std::condition_variable wakeup_;
  std::condition_variable ended_;  // running_ cleared (under mutex_): wait()
  std::thread thread_;
  std::atomic<bool> running_{false};
  // Written under mutex_ (so that waits see it), read by the thread without it.
  std::atomic<bool> stop_requested_{false};
  // The steps the next thread may run (nullopt: until stop()): set by start() before the thread
  // begins, then read by that thread only.
  std::optional<std::uint64_t> step_budget_;
  std::atomic<double> realtime_factor_{0.0};
};

}  // namespace mjfast
