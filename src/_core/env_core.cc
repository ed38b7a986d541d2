#include "env_core.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <utility>

#include "errors.h"
#include "mujoco_guard.h"

namespace mjfast {
namespace {

using Clock = std::chrono::steady_clock;

// After a stall longer than this (a slow plugin, a debugger), the pacing re-anchors instead of
// running flat out to catch up.
constexpr auto kMaxPacingLag = std::chrono::milliseconds(100);
// The furthest a paced step may be due from its anchor and still get a deadline: 100 years, far
// inside the 292 years of the steady clock's nanosecond ticks (see Pacer::wait_until).
constexpr std::chrono::duration<double> kFarFuture{100.0 * 365.25 * 24 * 3600};

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
constexpr double kMeasureWindow = 0.5;

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

EnvCore::EnvCore(bool render_sync) : render_(std::make_unique<RenderCore>(&host_, render_sync)) {}

EnvCore::~EnvCore() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() refuses only where the env is in use on this thread.
  }
  // The Python objects of the last binding are released here, with no lock of ours held.
}

void EnvCore::bind(const mjModel* model, mjData* data, mjData* control_scratch,
                   std::shared_ptr<void> owner) {
  if (data_) hooks::unregister_pair(data_);
  model_ = model;
  data_ = data;
  host_.bind_model(model, data);
  {
    // A control read()/write() in progress holds this mutex while it uses the old scratch data:
    // once it is ours, nothing reaches the old binding any more.
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.rebind(model, control_scratch, data);
  }
  std::swap(bound_owner_, owner);  // `owner` now holds the old binding: released on return
  identity_ = identity_of(model);
  state_size_.store(mj_stateSize(model, kStateSpec), std::memory_order_release);
  state_scratch_.assign(static_cast<std::size_t>(state_size_.load()), 0.0);
  advance(model_generation_);
  hooks::register_pair(model, data, weak_from_this());
  clear_simulation_fault();  // new data: nothing of the old one's state carries over
}

void EnvCore::load_next_plugin_generation() {
  const PluginGeneration next = advance(plugin_generation_);
  const SimulationRequests::CreationScope creating(weak_from_this());  // native host services
  const mujoco_guard::Scope guard;  // a native load's MuJoCo error is its load failure
  host_.load_generation(model_generation(), next);
}

void EnvCore::check_open(const char* what) const {
  if (closed_) throw std::logic_error(std::string(what) + " on a closed env");
}

void EnvCore::check_can_step(const char* what) const {
  check_open(what);
  if (hooks::in_dispatch_of(this)) {
    throw std::logic_error(std::string(what) + " called from inside a plugin callback");
  }
  if (pause_owner_.load() == std::this_thread::get_id()) {
    // This thread holds the env at a step boundary: it is inside reset(), reload() or close()
    // (a plugin's load, reset or unload calling back into the env).
    throw std::logic_error(std::string(what) +
                           " from inside the env's reset, reload or close (a plugin's load/init, "
                           "reset/on_reset or unload/cleanup) would deadlock");
  }
  if (host_.scope_held_by_this_thread()) {
    throw std::logic_error(std::string(what) +
                           " inside an acquire_plugin() block would deadlock: leave the block "
                           "first");
  }
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

void EnvCore::set_step_recorder(std::shared_ptr<StepRecorder> recorder) {
  check_open("record()");
  pause();
  struct Resume {
    EnvCore& env;
    ~Resume() { env.resume(); }
  } resume{*this};
  check_open("record()");  // closed while this waited
  if (recorder) recorder->begin(model_, data_);
  step_recorder_ = std::move(recorder);
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

void EnvCore::record_fault(std::exception_ptr fault) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (!fault_) fault_ = std::move(fault);
  fault_pending_.store(true, std::memory_order_release);
}

void EnvCore::raise_fault_if_any(bool refuse_undefined_state) {
  std::exception_ptr fault;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    fault = std::exchange(fault_, nullptr);
    fault_pending_.store(false, std::memory_order_release);
    if (!fault && refuse_undefined_state && simulation_invalid_.load(std::memory_order_acquire)) {
      fault = std::make_exception_ptr(
          SimulationError("the simulation state is undefined after a MuJoCo error (" +
                          simulation_error_ + "): call env.reset() or env.reload() first"));
    }
  }
  if (fault) std::rethrow_exception(fault);
}

void EnvCore::clear_simulation_fault() {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  simulation_invalid_.store(false, std::memory_order_release);
  simulation_error_.clear();
}

std::unique_lock<std::mutex> EnvCore::lock_for_step() {
  std::unique_lock<std::mutex> lock(step_mutex_, std::defer_lock);
  if (!hooks::in_dispatch()) {
    lock.lock();
  } else if (!lock.try_lock()) {
    throw std::logic_error(
        "step() of an env that is busy, from inside another env's plugin callback: waiting "
        "there could deadlock (two envs stepping each other)");
  }
  return lock;
}

void EnvCore::step(std::int64_t n, const InterruptPoll* interrupted) {
  if (n < 0) throw std::invalid_argument("step(n) needs n >= 0, got " + std::to_string(n));
  check_can_step("step()");
  join_ended_thread();
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
      while (done < n && pause_requests_.load(std::memory_order_acquire) == 0) {
        if (reset_requested()) honour_reset_request_locked();
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
      {
        std::unique_lock<std::mutex> wait(thread_mutex_);
        thread_wakeup_.wait(wait, [&] { return pause_requests_.load() == 0; });
      }
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
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.clear(data_);
  }
  hooks::DispatchScope dispatching(this);
  const mujoco_guard::Scope guard;  // a native on_reset's MuJoCo error fails that plugin
  raise_if(host_.reset(model_generation()));
}

void EnvCore::notify_geometry_changed(int geom_id) {
  hooks::DispatchScope dispatching(this);
  const mujoco_guard::Scope guard;
  raise_if(host_.notify_geometry_changed(model_generation(), geom_id));
}

void EnvCore::arm_control() {
  if (control_.armed()) return;
  pause();
  try {
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.arm(data_);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    resume();
    throw;
  }
  resume();
}

std::unique_lock<std::mutex> EnvCore::enter_control(Callback plugins, const char* what,
                                                    const Blocking& blocking) {
  check_open(what);
  // With plugins the call dispatches, taking the host's control mutex after ours; from inside a
  // plugin callback (which holds the host) or an acquire_plugin block that order would invert,
  // so it is refused there before any lock is taken.
  if (host_.has_callback(plugins) &&
      (hooks::in_dispatch_of(this) || host_.scope_held_by_this_thread())) {
    throw std::logic_error(std::string(what) +
                           " with control plugins loaded, from inside a plugin callback or an "
                           "acquire_plugin() block, would deadlock");
  }
  if (!control_.armed()) blocking([this] { arm_control(); });
  std::unique_lock<std::mutex> lock(control_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) blocking([&lock] { lock.lock(); });
  return lock;
}

template <class Call>
void EnvCore::call_control_plugins(Callback callback, const Blocking& blocking, Call&& call) {
  if (!host_.has_callback(callback)) {
    call(nullptr);
    return;
  }
  // A plugin calling step, reset or a blocking control call of this env from there is refused.
  blocking([&] {
    hooks::DispatchScope dispatching(this);
    // A MuJoCo error in a plugin (mju_error, or mj_kinematics giving up on the scratch data) is
    // thrown into that plugin's dispatch, which fails it like any exception (PluginError), instead
    // of ending the process. It unwinds through the frames that hold the control mutexes.
    const mujoco_guard::Scope guard;
    try {
      call(&host_);
    } catch (...) {
      // MuJoCo may have left a half-done computation (a marked stack) in the scratch data.
      if (guard.caught_error()) control_.reset_scratch();
      throw;
    }
  });
}

void EnvCore::control_read(const Blocking& blocking, const ControlStateUse& use) {
  const auto lock = enter_control(Callback::kUpdateRead, "control.read()", blocking);
  ControlStateView state;
  call_control_plugins(Callback::kUpdateRead, blocking, [&](PluginHost* plugins) {
    state = control_.read_locked(plugins, model_generation());
  });
  use(control_.model(), state);
}

void EnvCore::control_write(const Blocking& blocking, const CommandSource& commands) {
  const auto lock = enter_control(Callback::kUpdateWrite, "control.write()", blocking);
  const Commands staged = commands(control_.model());
  call_control_plugins(Callback::kUpdateWrite, blocking, [&](PluginHost* plugins) {
    control_.write_locked(staged, plugins, model_generation());
  });
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

void EnvCore::start(std::optional<double> realtime_factor) {
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
  physics_thread_ = std::thread([this] { run_physics(); });
}

void EnvCore::join_ended_thread() {
  std::thread ended;
  {
    std::lock_guard<std::mutex> lock(thread_mutex_);
    // A thread that ended by itself (a fault) cleared running_ on its way out.
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

// ---- The physics thread ---------------------------------------------------------------------

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
  bool faulted = false;
  while (!stop_requested_.load(std::memory_order_acquire)) {
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
    if (step->faulted) {
      faulted = true;
      break;
    }
    if (has_pending_error() && !report_plugin_error()) break;
    pace(pacer, tally, step->sim_time, step->end);
  }
  tally.run_until(Clock::now());
  tally.flush();
  if (faulted || fault_pending_.load(std::memory_order_acquire)) end_on_fault();
  if (thread_hooks_.on_exit) thread_hooks_.on_exit();
}

bool EnvCore::physics_held() const {
  // A user pause holds the thread too, except to carry out a plugin's reset request.
  return pause_requests_.load(std::memory_order_acquire) > 0 ||
         (stepping_paused() && !reset_requested());
}

void EnvCore::wait_while_held() {
  std::unique_lock<std::mutex> lock(thread_mutex_);
  thread_wakeup_.wait(lock, [&] { return stop_requested_.load() || !physics_held(); });
}

std::optional<EnvCore::PhysicsStep> EnvCore::physics_step(Pacer& pacer, StatisticsTally& tally) {
  std::lock_guard<std::mutex> step_lock(step_mutex_);
  if (reset_requested()) honour_reset_request_locked();
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
    return stop_requested_.load() || pause_requests_.load(std::memory_order_acquire) > 0 ||
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
  std::lock_guard<std::mutex> lock(thread_mutex_);
  running_.store(false, std::memory_order_release);
}

void EnvCore::close() {
  if (closed_) return;
  if (host_.scope_held_by_this_thread()) {
    throw std::logic_error(
        "close() inside an acquire_plugin() block would deadlock: leave the "
        "block first");
  }
  stop_thread();  // a fault it ended with dies with the env
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

// ---- State (SPEC §20) --------------------------------------------------------------------------

std::shared_ptr<const EnvCore::ModelIdentity> EnvCore::identity_of(const mjModel* m) {
  // FNV-1a, 128 bits, over the sizes of every part of a physics state, the counts of the objects
  // that names and plugins refer to, the joint types and the names buffer: what makes a state
  // mean the same thing in two models. Parameter values (masses, gains, friction) stay out.
  using u128 = unsigned __int128;
  const u128 prime = (u128{0x0000000001000000ull} << 64) | 0x000000000000013Bull;
  u128 hash = (u128{0x6c62272e07bb0142ull} << 64) | 0x62b821756295c58dull;
  const auto feed = [&](const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash ^= bytes[i];
      hash *= prime;
    }
  };
  const auto feed_size = [&](std::int64_t value) { feed(&value, sizeof(value)); };
  feed_size(1);  // the signature's own version
  for (int bit = 0; bit < mjNSTATE; ++bit) feed_size(mj_stateSize(m, 1 << bit));
  for (const std::int64_t count :
       {std::int64_t{m->nq},      std::int64_t{m->nv},           std::int64_t{m->nu},
        std::int64_t{m->na},      std::int64_t{m->nbody},        std::int64_t{m->njnt},
        std::int64_t{m->ngeom},   std::int64_t{m->nsite},        std::int64_t{m->ncam},
        std::int64_t{m->nlight},  std::int64_t{m->nmesh},        std::int64_t{m->neq},
        std::int64_t{m->ntendon}, std::int64_t{m->nsensor},      std::int64_t{m->nsensordata},
        std::int64_t{m->nmocap},  std::int64_t{m->nkey},         std::int64_t{m->nuserdata},
        std::int64_t{m->nplugin}, std::int64_t{m->npluginstate}, std::int64_t{m->nflex}}) {
    feed_size(count);
  }
  feed(m->jnt_type, sizeof(int) * static_cast<std::size_t>(m->njnt));
  feed_size(m->nnames);
  feed(m->names, static_cast<std::size_t>(m->nnames));
  static constexpr char kHex[] = "0123456789abcdef";
  auto identity = std::make_shared<ModelIdentity>();
  for (int shift = 124; shift >= 0; shift -= 4) {
    identity->signature += kHex[static_cast<unsigned>(hash >> shift) & 0xf];
  }
  const std::string name = m->nnames > 0 ? std::string(m->names) : std::string();
  identity->description = "model '" + name + "' (nq=" + std::to_string(m->nq) +
                          ", nv=" + std::to_string(m->nv) + ", nu=" + std::to_string(m->nu) +
                          ", na=" + std::to_string(m->na) + ", nbody=" + std::to_string(m->nbody) +
                          ")";
  return identity;
}

void EnvCore::refuse_state_call(const char* what) const {
  // A plugin's callback (its load/init and reset included) has the model and data at hand, and
  // the step it runs in holds what a state call waits for.
  if (hooks::in_plugin_callback()) {
    throw std::logic_error(std::string(what) +
                           " called from inside a plugin callback: a plugin has the model "
                           "and data in its callbacks (and get_state/set_state of its own)");
  }
  check_open(what);
}

namespace {

// Resumes what pause() held, on every way out.
struct Resume {
  EnvCore& env;
  ~Resume() { env.resume(); }
};

}  // namespace

bool EnvCore::get_state(double* physics, std::size_t size, StateHeader& header,
                        std::vector<PluginStateEntry>* plugins) {
  refuse_state_call("get_state()");
  pause();  // a step boundary; refused inside an acquire_plugin block
  const Resume resume{*this};
  check_open("get_state()");  // closed while this waited
  if (size != static_cast<std::size_t>(state_size_.load(std::memory_order_relaxed))) return false;
  mj_getState(model_, data_, physics, kStateSpec);
  header.step_count = step_count();
  header.model = identity_;
  if (plugins != nullptr) {
    plugins->clear();
    if (host_.has_stateful_plugins()) {
      const hooks::DispatchScope dispatching(this);  // what a plugin calls back into is refused
      const mujoco_guard::Scope guard;               // a native plugin's MuJoCo error is its error
      *plugins = host_.get_states();
    }
  }
  return true;
}

void EnvCore::set_state(const double* physics, std::size_t size, std::uint64_t step_count,
                        const std::string& signature, const std::string& description,
                        const std::vector<PluginStateEntry>& plugins) {
  refuse_state_call("set_state()");
  pause();
  const Resume resume{*this};
  check_open("set_state()");
  if (signature != identity_->signature) {
    throw std::invalid_argument("set_state(): the state is of " + description + ", signature " +
                                signature + ", but this env runs " + identity_->description +
                                ", signature " + identity_->signature +
                                " (a state moves only between models with the same sizes and "
                                "names)");
  }
  const auto expected = static_cast<std::size_t>(state_size_.load(std::memory_order_relaxed));
  if (size != expected) {
    throw std::invalid_argument("set_state(): the state's physics has " + std::to_string(size) +
                                " values, but a state of " + identity_->description + " has " +
                                std::to_string(expected));
  }
  const bool with_plugins = !plugins.empty() || host_.has_stateful_plugins();
  const std::uint64_t previous_count = this->step_count();
  if (with_plugins) mj_getState(model_, data_, state_scratch_.data(), kStateSpec);
  mj_setState(model_, data_, physics, kStateSpec);
  step_count_.store(step_count, std::memory_order_release);
  if (with_plugins) {
    try {
      const hooks::DispatchScope dispatching(this);
      const mujoco_guard::Scope guard;
      host_.set_states(plugins);
    } catch (...) {
      // The plugins put themselves back; the physics and the count go back here.
      mj_setState(model_, data_, state_scratch_.data(), kStateSpec);
      step_count_.store(previous_count, std::memory_order_release);
      throw;
    }
  }
  clear_simulation_fault();  // a MuJoCo error's undefined data is replaced whole
  {
    // Commands staged before are not part of the state: dropped as at a reset.
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.clear(data_);
  }
  // The derived quantities for the new state; plugins learn of it through set_state, not
  // through a control callback (as _core.CallbackFree does for a reset's mj_forward).
  const hooks::DispatchScope callback_free;
  const mujoco_guard::Scope guard;
  try {
    mj_forward(model_, data_);
  } catch (const mujoco_guard::MujocoCallError& error) {
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      simulation_error_ = error.what();
    }
    simulation_invalid_.store(true, std::memory_order_release);
    throw SimulationError(std::string("set_state(): MuJoCo error in mj_forward: ") + error.what() +
                          " (the simulation state is undefined until env.reset())");
  }
}

}  // namespace mjfast
