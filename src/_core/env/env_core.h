// EnvCore: the compiled half of MujocoEnv. It steps the bound model and data (from the caller's
// thread in step(), or from its own physics thread), routes the hooks' calls to the PluginHost,
// and pauses stepping at a step boundary for reset, reload and geometry edits. It owns the env's
// PluginHost, ControlBridge and RenderCore (its cameras, called at a step's end). The
// mjModel/mjData memory is the Python objects'; bind() hands the core an owner that keeps them
// alive for as long as any thread can reach them. It knows nothing of Python.
//
// THE LOCK ORDER of the whole process: every mutex of the core and every lock of the Python
// package, placed once, here (README and every other file point here). A thread may take a lock
// only while it holds none that comes later in this list:
//
//   0. VectorCore::mutex_          (vector_core.h) a whole VectorEnv.step(n) over all its worlds,
//                                  a gather of its arrays, and the façade's operations on its
//                                  worlds (reset, state, close); then WorkerPool::run_mutex_ (one
//                                  batch at a time). The holder waits for the pool's workers,
//                                  which take 2-7 of each world as its EnvCore::step does, so it
//                                  is refused where this thread holds any world (its plugin
//                                  callback, load/reset, or a worker of that pool).
//   1. MujocoEnv._lifecycle_lock   (Python) one lifecycle operation at a time: construction's
//                                  load, reset, reload, close, geometry edits, section 13 calls.
//   2. EnvCore::step_mutex_        whoever steps, for one step (physics thread) or one step(n)
//                                  stretch (caller's thread); a hold_steps() holder for its hold.
//   3. EnvCore::control_mutex_     one control read()/write() at a time (enter_control); the
//                                  bridge's rebind/clear/arm.
//   4. PluginHost::control_mutex_  update_read/update_write dispatch; generation changes.
//   5. RenderCore::bound_mutex_    the cameras' binding; held by the capture (after_step).
//   6. PluginHost::mutex_          physics-side dispatch (one StepLock per step); generation
//                                  changes; acquire_plugin holds 4 and 6 for its block.
//  6a. PyHandoffRing::taker_mutex_ (bind_handoff.cc) one take() of a ring at a time, and
//      DrainingRecorder::drain_mutex (bind_recorder.cc) one drain() of a recording's
//                                  StepRecorder: taken with the GIL released, held while taking
//                                  the ring's leaf mutex (7) and then the GIL (8) back to build
//                                  what it returns.
//   7. leaves, held for a copy or a swap and never while taking another lock or calling out:
//      RenderCore::queue_mutex_ (-> its stats_mutex_), CameraHandle::mutex_ (-> its
//      FrameStore::mutex_), PhysicsThread::mutex_ (physics_thread.h), stats_mutex_, pending_mutex_,
//      request_mutex_, the hooks' registry_writer_mutex, StepRecorder::ring_mutex_ (a
//      recording's ring: one state or command copy at the end of a step, or the writer's drain),
//      HandoffRing::mutex_ (handoff_ring.h: a bus message's reference moved in by the
//      publishing thread, which may hold the GIL for it because no holder waits for anything, or
//      out by a writer thread; a full 'wait' ring's producer waits on its condition with the GIL
//      released, and so does a recording's stepping thread on StepRecorder's, for the writer),
//      NativeHostServices::cameras_mutex_ (a native plugin's open cameras),
//      DueWindow::mutex_ (plugin_host/due_window.h: a rate plugin's two due-window times, read
//      by the stepping thread before a last_stage call and set by the plugin under the GIL),
//      ControllerEvents::mutex_ (control/native_control.h: a SPEC §23 controller's hand-over and
//      copies, taken by its control() once per step and by its plugin's thread), WorkerPool::mutex_
//      (a batch's hand-out and count), VectorCore::failed_mutex_; in Python, Bus._lock and
//      Node._lock (node.py: the subscribers and services are copied out, then called with no lock
//      held), ParameterServer._lock (params.py), discovery's _lock (the in-process registry), and
//      hooks.py's _holders_lock (around setting MuJoCo's two callback slots; an RLock because the
//      collector may close a dropped env inside it, whose locks no other thread can hold),
//      ThrottledLog._lock (_throttled_log.py: a count and a time per key), CallListeners._lock
//      (calls.py: the env's call listeners swapped; they are told with no lock of theirs held),
//      ActionServer._lock (plugin/actions.py: its goal table), JointTrajectoryController._lock and
//      GripperActionController._lock (their active goal).
//      A Python lock is taken with the GIL held (8) but waits without it, like the core's.
//   8. the GIL: no thread holding it waits for 0-7 (the bindings release it first, with
//      without_gil(), which also takes it back outside destructors for exiting daemon threads).
//   9. native_plugin_adapter.cc's library_mutex: taken with the GIL held (the factory creates a
//      native adapter from Python) around dlopen, whose loader lock and library initialisers
//      know nothing of Python or of 0-8.
//
// Python locks of the interop layers, outside the core's order: each guards its own state,
// takes none of 1-7 and is never held across a call into an env. remote/: BusServer's _state (a
// Condition) and _publishers_lock (held across declaring a Zenoh publisher), _Counters._lock,
// Client's and RemoteSubscription's _lock; ros2/: Bridge._lock (held across Zenoh declares and
// undeclares), the bridge's _Work._state (a Condition counting its work in progress, never held
// across it) and types.py's _lock (rosbags' type store); routes.py's _lock (held while an env's
// route table is built, which takes Bus._lock to see the subscribers, and may be taken with
// Bridge._lock held); node.py's Bus._latch_lock (an RLock held
// while the bus taps, these consumers, get latched messages, so that each gets them in order;
// the taps call no env); handoff.py's HandedOffTap._delivering (an RLock held while its
// function delivers one message, by its writer thread, or by a publisher outside any plugin
// callback delivering an inline topic's message itself, which may hold Bus._latch_lock and
// ActionServer._status_lock; the function, a tap's, waits for none of 1-7 and takes
// Bridge._lock); viewer.py's _window_lock; web/: WebViewer._close_lock (held while the
// web server stops) and server.py's _START_LOCK (held while a web server starts);
// cli/remote.py's echo lock; ros2/simulation_services.py's StepAction._lock (the running
// simulate_steps goal; a leaf) and StepAction._shared_lock (an env's action made or shut down:
// taken before Bus._lock, and held while joining the action's stepping thread, which never takes
// it); plugin/actions.py's ActionServer._status_lock (held across
// publishing an action's status array on the bus, so arrays go out in the order of their
// transitions; taken with 6 held when a reset aborts a goal) and ros2/actions.py's
// ActionServices._lock (the get_result calls waiting for a goal's end). Those on the
// publishing path (BusServer's, Bridge._lock) may be taken with 2 and 6 held, by a plugin's
// publish. No Python lock is held across a call into an env: ForwardCommand._lock (the shipped
// mjfast/ForwardCommand) is a leaf of 7, held to hand a command over, never across its
// env.control.read() and write() (a physics-thread publish must not wait for a thread that
// waits for a step boundary).
//
// The one reverse edge: a plugin's load() runs under 4 and 6 and may open a camera (5). Loads run
// with stepping paused (the loader holds 2), so no capture holds 5 meanwhile.
//
// Which thread calls what: user threads call everything public; the physics thread (start())
// steps and dispatches the physics-side callbacks; a control thread calls read()/write(), which
// take 3 and 4 but never 6, nor 2 after the first call (which arms the bridge at a step
// boundary), so a control loop never waits for a step; the render thread
// takes only leaves (7) and the GL context, so a step may wait for it (render_sync) and it never
// waits for a step.
//
// What would wait on the caller's own lock is refused with std::logic_error (mjfast.LogicError),
// never waited for: stepping, pausing, reset/reload/close or a blocking control call from inside
// this env's plugin callback (hooks::in_dispatch_of), from a plugin's load/reset/unload (the
// thread holds 2: hold_owner_), or inside an acquire_plugin block (holds 4 and 6); RenderCore's
// binding calls from a render_callback or an acquire_plugin block; step() of another env that is
// busy, from inside a plugin callback (try_lock: two envs stepping each other would deadlock).
//
// EnvCore's own mutexes: step_mutex_ (2) and control_mutex_ (3) above; its PhysicsThread's
// mutex_ guards the physics thread's lifecycle and every wait for a step boundary (the thread's
// while held and for its pace, a step(n) caller's for a step hold), so hold requests, pauses and
// reset requests change under it (never held across a step);
// stats_mutex_ the figures; pending_mutex_ a plugin error or fault waiting to be raised;
// request_mutex_ a plugin's reset request and its handler.
#pragma once

#include <mujoco/mujoco.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/call_context.h"
#include "common/generation.h"
#include "common/hooks.h"
#include "common/sim_requests.h"
#include "control/control_bridge.h"
#include "env/physics_thread.h"
#include "plugin_host/plugin_host.h"
#include "record/step_recorder.h"
#include "render/render_core.h"

namespace mjfast {

struct EnvStatistics {
  std::uint64_t steps = 0;
  double stepping_wall_s = 0.0;  // wall time spent inside step() calls and the physics thread
  double simulated_s = 0.0;      // simulated time advanced by those steps
  // Wall time of step() calls plus the physics thread's running time including its pacing waits
  // (pauses excluded): the denominator of the achieved real-time factor.
  double elapsed_wall_s = 0.0;
  bool running = false;
};

class EnvCore : public hooks::HookTarget,
                public SimulationRequests,
                private SteppingTarget,
                public std::enable_shared_from_this<EnvCore> {
 public:
  // Called on the physics thread when it starts and ends (the bindings attach it to Python), and
  // with a plugin error the physics thread cannot raise to anyone.
  struct ThreadHooks {
    std::function<void()> on_start;
    std::function<void()> on_exit;
    std::function<void(std::exception_ptr)> on_error;
  };

  // `render_sync`: each render turn finishes before the next step starts (RenderCore).
  explicit EnvCore(bool render_sync = false);
  ~EnvCore() override;
  EnvCore(const EnvCore&) = delete;
  EnvCore& operator=(const EnvCore&) = delete;

  PluginHost& host() { return host_; }

  // Binds a (new) model and data: registers the pair with the hooks, the host and the control
  // bridge (`control_scratch` is the bridge's scratch mjData for the same model). Called at
  // construction and, inside a pause, at reload. Advances the model generation. `owner` keeps
  // the memory of all three alive (the Python objects): the core holds it until the next bind
  // has taken every lock under which another thread could still reach the old pointers (the
  // control mutex of a read() in progress), and until the core itself goes.
  void bind(const mjModel* model, mjData* data, mjData* control_scratch,
            std::shared_ptr<void> owner);
  // `control_scratch` may be null at bind() while no plugin has update_read/update_write (a
  // VectorEnv world, most envs: it is an mjData as large as the world's own); the first such
  // plugin's load gives it here (for the bound model), with stepping held. `owner` keeps it alive
  // until the next bind().
  void set_control_scratch(mjData* control_scratch, std::shared_ptr<void> owner);
  bool has_control_scratch() const { return control_.has_scratch(); }

  // The bound pair (null before the first bind); replaced only by bind(), inside a pause.
  const mjModel* model() const { return model_; }
  mjData* data() const { return data_; }

  ModelGeneration model_generation() const { return model_generation_.load(); }
  PluginGeneration plugin_generation() const { return plugin_generation_.load(); }
  // Loads the next plugin generation through the host (inside a pause, or before stepping).
  void load_next_plugin_generation();

  // Polled between steps by step() on the thread that called it: null, or what interrupts the
  // call (the bindings return Python's KeyboardInterrupt after a Ctrl-C on the main thread).
  using InterruptPoll = std::function<std::exception_ptr()>;

  // Runs n steps on the calling thread. Per step: pre_step plugins, mj_step (control and passive
  // plugins through the hooks), last_stage plugins. Stops after a step in which a plugin raised
  // and throws PluginDispatchError; after a step in which MuJoCo raised a fatal error and throws
  // SimulationError; at a step boundary where `interrupted` returns an error, and throws
  // Interrupted with it.
  void step(std::int64_t n, const InterruptPoll* interrupted = nullptr);

  // THE real-time factor rule (SPEC §13) of start(), set_realtime_factor() and, through
  // _core.checked_realtime_factor, of mjfast's Python: a positive finite number, or nullopt
  // (unbounded); else std::invalid_argument naming it as `shown` (default: the number's %g).
  static std::optional<double> checked_realtime_factor(std::optional<double> factor,
                                                       const std::string& shown = "");
  // Starts the physics thread, paced at `realtime_factor` (nullopt: unbounded). With
  // `max_steps`, its step budget: the thread stops by itself once it has run exactly that many
  // steps (its own steps: step(n) calls made while it is paused are not counted; a pause holds
  // the budget too), paced to the end of the last one, as if stop() had been called then.
  void start(std::optional<double> realtime_factor,
             std::optional<std::uint64_t> max_steps = std::nullopt);
  void stop();
  bool running() const { return physics_.running(); }
  // Waits until the physics thread is not running (stopped, its step budget spent, or ended by
  // a fault, which stop() then raises) or `timeout_s` seconds have passed (nullopt: no limit);
  // true once it is not running. Woken by the thread's end (a condition variable); with
  // `interrupted` (the main thread), it asks that poll every 20 ms (SPEC §18: Ctrl-C within 100 ms)
  // and throws Interrupted with what it returns. std::invalid_argument for a negative or NaN
  // timeout; refused (std::logic_error) where the thread could not end meanwhile: on the physics
  // thread, inside this env's plugin callback, its step hold or an acquire_plugin block.
  bool wait(std::optional<double> timeout_s, const InterruptPoll* interrupted = nullptr);
  void set_thread_hooks(ThreadHooks hooks) { thread_hooks_ = std::move(hooks); }
  // The env's cameras and the render turn's owner (SPEC §10): made and owned here, called at the
  // end of a step when a camera is due; the bindings only expose it.
  RenderCore& render_core() { return *render_; }

  // A recording's tap on the stepping thread (SPEC §20), or null: attached and detached with
  // stepping paused; attaching captures the first state at once.
  void set_step_recorder(std::shared_ptr<StepRecorder> recorder);

  // THE STEP HOLD (internal; not the user's pause() below): stops stepping at the next step
  // boundary and holds it there until release_steps(), for reset, reload, close, geometry edits,
  // state calls and arming the control bridge. Re-entrant on the same thread, which is then
  // marked (call_context.h) as holding this env's step boundary.
  void hold_steps();
  void release_steps();
  // Whether this thread holds the step hold.
  bool holds_steps() const { return hold_owner_.load() == std::this_thread::get_id(); }

  // Refuses `what` (call_context::refuse) if this thread's context is `kind` for this env: one of
  // kSimulationControl (any plugin callback), kOwnCallback (this env's host held: a callback of
  // its own), kAcquireBlock (inside this env's acquire_plugin block), kLifecycle (inside a
  // lifecycle operation of this env; see call_context::LifecycleMark). Python's checks
  // (_core.EnvCore.check_call) come through here.
  void check_call(const std::string& what, call_context::Refusal kind) const;

  // Calls of the host's reset / notify entry points made with the env paused; a plugin error is
  // thrown as PluginDispatchError. reset_plugins() also clears the control bridge.
  void reset_plugins();
  void notify_geometry_changed(int geom_id);

  // Marks the env closed: stops the thread, drops the plugins, unregisters the pair.
  void close();
  // Throws std::logic_error naming `what` if the env is closed.
  void check_open(const char* what) const;
  // Throws std::logic_error naming `what` where this thread may not step the env: closed, inside
  // its plugin callback, holding it paused (a plugin's load/reset/unload), in an acquire_plugin
  // block.
  void check_can_step(const char* what) const;

  // After a MuJoCo error the data is in an undefined state: stepping raises SimulationError
  // until the env's data is reset (env.reset) or replaced (reload), which calls this.
  void clear_simulation_fault();

  EnvStatistics statistics() const;

  // ---- The control side (SPEC §7; ControlBridge holds the buffers) ----------------------------
  // Runs the given work where a control call may block: waiting for control_mutex_ (its holder
  // may be inside an update_read/update_write plugin), arming (a pause) or running those plugins.
  // The bindings release the GIL there.
  using Blocking = std::function<void(const std::function<void()>&)>;
  using ControlStateUse = std::function<void(const mjModel*, const ControlStateView&)>;
  using CommandSource = std::function<Commands(const mjModel*)>;
  // The newest control state, through the update_read plugins: `use(model, state)` is called with
  // control_mutex_ held, while `state` is valid. A plugin error is thrown.
  void control_read(const Blocking& blocking, const ControlStateUse& use);
  // Stages the commands `commands(model)` returns (it validates all of them first, and they stay
  // valid until this returns), through the update_write plugins. It is called with
  // control_mutex_ held; a plugin error is thrown and nothing is staged.
  // Both are refused (std::logic_error) on a closed env and, with plugins of their kind, from
  // inside this env's plugin callback or an acquire_plugin block.
  void control_write(const Blocking& blocking, const CommandSource& commands);
  // Raises the error a control-side dispatch returned, if any.
  static void raise_if(const DispatchError& error);

  // ---- State (SPEC §20; mjfast.SimState is made of what these give) ---------------------------
  // What a physics state holds: mjSTATE_INTEGRATION, everything mj_step reads and does not
  // recompute (time first, qpos, qvel, act, mocap, userdata, plugin state, ctrl, applied forces,
  // equality switches, the solver's warm start).
  static constexpr int kStateSpec = mjSTATE_INTEGRATION;
  // The bound model's physics state size, in doubles.
  int state_size() const { return state_size_.load(std::memory_order_acquire); }
  // The cheap path for whoever already holds the data still (the recorder on the stepping thread
  // at the end of a step, from a StepObserver's after_step; a thread inside pause()): copies the
  // bound data's physics state, state_size() doubles, into `out`. No lock, no allocation, no
  // Python, no plugins. Anywhere else it races with stepping: use get_state().
  void capture_physics(double* out) const { mj_getState(model_, data_, out, kStateSpec); }
  // The bound model's identity: `signature`, a hash of its sizes and names (not of parameter
  // values: models that differ only in masses or gains share it), and `description`, its name
  // and main sizes for messages. Swapped by bind(); read it under a pause or from get_state().
  struct ModelIdentity {
    std::string signature;
    std::string description;
  };
  static std::shared_ptr<const ModelIdentity> identity_of(const mjModel* model);
  // The bound model's identity, for whoever holds the data still as for capture_physics() (bind()
  // swaps it with stepping paused).
  const std::shared_ptr<const ModelIdentity>& model_identity() const { return identity_; }

  struct StateHeader {
    std::uint64_t step_count = 0;
    std::shared_ptr<const ModelIdentity> model;
  };
  // env.get_state(): at a step boundary (pausing a running physics thread as pause() does), the
  // physics state into `physics` (`size` doubles), the step count and the model's identity into
  // `header`, and, if `plugins` is given, the state of every active plugin that has one. Returns
  // false, having changed nothing, when `size` is not state_size() (a reload came in between:
  // ask again). Refused (std::logic_error) from inside a plugin callback, an acquire_plugin
  // block or on a closed env; a plugin's error is thrown as PluginDispatchError.
  bool get_state(double* physics, std::size_t size, StateHeader& header,
                 std::vector<PluginStateEntry>* plugins);
  // env.set_state(): at a step boundary, checks that `signature` is the bound model's
  // (std::invalid_argument naming both models) and the sizes, then sets the physics
  // (mj_setState), the step count and each stateful plugin's state (PluginHost::set_states), drops
  // staged control commands (as a reset does) and runs mj_forward with no callbacks; no plugin's
  // reset runs. All or nothing: a plugin that refuses its state leaves everything as it was.
  // Refused where get_state() is.
  void set_state(const double* physics, std::size_t size, std::uint64_t step_count,
                 const std::string& signature, const std::string& description,
                 const std::vector<PluginStateEntry>& plugins);

  // hooks::HookTarget
  void on_control(const mjModel* m, mjData* d) override;
  void on_passive(const mjModel* m, mjData* d) override;

  // ---- Simulation control (SPEC §13) --------------------------------------------------------
  // The user's pause (env.pause()/resume()), distinct from the re-entrant step hold above: while
  // set, the physics thread steps nothing (running() stays true) and step(n) is allowed while it
  // runs. pause_stepping() returns once the step in progress (if any) has ended; the next start()
  // begins paused if it is set; stop() clears it. resume_stepping() re-anchors the pacing.
  void pause_stepping();
  void resume_stepping();
  bool stepping_paused() const { return user_paused_.load(std::memory_order_acquire); }
  // Steps since the last reset or reload (the env calls reset_step_count() in both, paused).
  std::uint64_t step_count() const { return step_count_.load(std::memory_order_acquire); }
  void reset_step_count() { step_count_.store(0, std::memory_order_release); }
  // The physics thread's target pace (nullopt: unbounded); a running thread re-anchors its
  // pacing on the change, at once (a pacing wait in progress ends).
  void set_realtime_factor(std::optional<double> realtime_factor);
  std::optional<double> realtime_factor() const;
  // Simulated over wall time of recent stepping: the current window of running time once it
  // spans a fifth of kMeasureWindow, else the last full window, else the whole history; 0
  // before any step. A new real-time factor starts a new window.
  double measured_realtime_factor() const;
  // ---- The world reset (SPEC §5, §13): env.reset() and a plugin's request alike ------------
  // Where a reset goes, resolved and checked by the env before anything changes: the keyframe's
  // id (-1: the model's default state), then, where given, the whole qpos and qvel written over
  // it (the initial_joint_* parameters and the call's overrides); `keep_time` keeps data->time.
  struct ResetTarget {
    int keyframe = -1;
    std::vector<double> qpos;  // empty, or nq values
    std::vector<double> qvel;  // empty, or nv values
    bool keep_time = false;
  };
  // With the steps held (env.reset) or on the stepping thread at a step boundary (a request):
  // the data reset to `target`, a MuJoCo error's undefined state cleared, mj_forward with no
  // plugin callbacks (plugins learn of a reset through reset()), the step count zeroed, the
  // step observer's schedule restarted, then the staged commands dropped and every plugin's
  // reset (a plugin error thrown as PluginDispatchError). std::invalid_argument for a target
  // that does not fit the bound model, before anything changes.
  void reset_world(const ResetTarget& target);
  // SimulationRequests. A reset request is carried out by the core at the next step boundary
  // (on the stepping thread, step_mutex_ held, outside any dispatch): hooks.resolve(keyframe)
  // gives its target, or nullopt having reported why there is none (the keyframe names and
  // the initial_joint_* parameters are the Python env's); a reset that fails is handed to
  // hooks.report(keyframe, message), as there is no caller to raise it to. Without hooks a
  // request is dropped.
  void request_pause() override;
  void request_reset(std::optional<std::string> keyframe) override;
  struct ResetRequestHooks {
    std::function<std::optional<ResetTarget>(const std::optional<std::string>& keyframe)> resolve;
    std::function<void(const std::optional<std::string>& keyframe, const std::string& message)>
        report;
  };
  void set_reset_request_hooks(ResetRequestHooks hooks);

 private:
  // Takes step_mutex_ for a step() call; from inside another env's plugin callback only if it is
  // free at once (waiting there could close a cycle of envs stepping each other).
  std::unique_lock<std::mutex> lock_for_step();
  // One step with MuJoCo's errors and the hooks' ownership checked; false if the env faulted
  // (the fault is recorded and stepping must stop).
  bool step_once_checked();
  // A fault that ends stepping (MuJoCo error, hooks lost, an interrupt on the physics thread):
  // kept until the next step/stop/start raises it.
  void record_fault(std::exception_ptr fault);
  // Raises the recorded fault, if any (once); else, with `refuse_undefined_state`, a
  // SimulationError while a MuJoCo error has left the data undefined.
  void raise_fault_if_any(bool refuse_undefined_state = true);
  // mj_forward on the bound pair with no plugin callbacks (plugins learn of a reset or a new
  // state otherwise) and MuJoCo's errors guarded: an error leaves the data undefined, as after a
  // failed mj_step, and is thrown as SimulationError("<caller>: MuJoCo error in mj_forward: ...").
  // The one forward of reset_world ("reset") and set_state ("set_state()").
  void forward_callback_free(const char* caller);
  // Stops and joins the physics thread, raising nothing; clears the user's pause.
  void stop_thread();
  // A plugin error from a place that cannot unwind (inside mj_step) or from the stepping loop:
  // kept until the step that caused it returns.
  void record_error(DispatchError error);
  void rethrow_pending_error();
  // Runs `dispatch` (returning a DispatchError) and records what it returns or throws, to be
  // raised after the step: the one way every per-step dispatch is called. dispatch_guarded also
  // marks this thread as inside this env's dispatch for its duration.
  template <class Dispatch>
  void record_guarded(Dispatch&& dispatch);
  template <class Dispatch>
  void dispatch_guarded(Dispatch&& dispatch);
  bool has_pending_error() const { return pending_flag_.load(std::memory_order_acquire); }
  void step_once_locked(bool& simulation_failed, std::string& simulation_error);

  // SteppingTarget: what the physics thread (physics_, started by start()) calls
  // (env_physics.cc).
  void thread_started() override;
  void thread_ending() override;
  bool held() const override;
  bool boundary_due() const override;
  // One step under step_mutex_, after a reset request's reset; none if the user paused meanwhile.
  std::optional<Step> step_at_boundary() override;
  // Hands a plugin's error from the last step to on_error; false if it was an interrupt, which
  // ends the thread as a fault.
  bool after_step() override;
  bool report_fault() override;
  // Adds to the shared figures: `wall` spent stepping `steps` steps that advanced `simulated`
  // seconds, and `elapsed` wall time (stepping plus pacing waits) during which the env ran. From
  // step() too.
  void record_stepping(Clock::duration wall, double simulated, std::uint64_t steps,
                       Clock::duration elapsed) override;
  void restart_measure() override;
  // on_error(error) if set, whatever it raises swallowed (logging failed: nowhere left to say it).
  void report_quietly(std::exception_ptr error);
  // The start of a control call `what` that dispatches `plugins` callbacks: refused where it
  // would deadlock, then the bridge armed and control_mutex_ taken.
  std::unique_lock<std::mutex> enter_control(Callback plugins, const char* what,
                                             const Blocking& blocking);
  // Publishing snapshots starts here, at a step boundary.
  void arm_control();
  // Calls `call(plugins)`: with the host, in a dispatch scope inside `blocking`, when it has
  // `callback` plugins, else with null.
  template <class Call>
  void call_control_plugins(Callback callback, const Blocking& blocking, Call&& call);

  PluginHost host_;
  ControlBridge control_;
  std::mutex control_mutex_;             // the bridge's control side
  std::shared_ptr<void> bound_owner_;    // keeps model_, data_ and the bridge's scratch alive
  std::shared_ptr<void> scratch_owner_;  // a scratch given after bind() (set_control_scratch)
  std::mutex pending_mutex_;
  std::exception_ptr fault_;  // under pending_mutex_
  std::atomic<bool> fault_pending_{false};
  std::atomic<bool> simulation_invalid_{false};  // a MuJoCo error left data_ undefined
  std::string simulation_error_;                 // its message, under pending_mutex_
  DispatchError pending_error_;
  std::atomic<bool> pending_flag_{false};
  const mjModel* model_ = nullptr;
  mjData* data_ = nullptr;
  std::atomic<ModelGeneration> model_generation_{};
  std::atomic<PluginGeneration> plugin_generation_{};

  std::mutex step_mutex_;
  // step() calls in progress (holding or waiting to re-take step_mutex_): start() refuses while
  // there are any, and step() refuses once the thread runs (each checks the other's flag after
  // setting its own, so one of them sees the other).
  std::atomic<int> step_calls_{0};
  std::atomic<int> hold_requests_{0};
  std::atomic<std::thread::id> hold_owner_{};
  int hold_depth_ = 0;  // only touched by the hold owner

  ThreadHooks thread_hooks_;
  // After host_ (its render_callback dispatcher), so that it goes first.
  const std::unique_ptr<RenderCore> render_;
  std::shared_ptr<StepRecorder> step_recorder_;  // changed only with step_mutex_ held (paused)

  mutable std::mutex stats_mutex_;
  EnvStatistics stats_;
  // Running time over which measured_realtime_factor() is taken.
  static constexpr double kMeasureWindow = 0.5;

  // Simulation control (see the block of public methods above).
  void carry_out_reset_request_locked();
  void report_reset_failure(const ResetRequestHooks& hooks,
                            const std::optional<std::string>& keyframe, const std::string& message);
  bool reset_requested() const { return reset_requested_.load(std::memory_order_acquire); }
  std::atomic<bool> user_paused_{false};
  std::atomic<std::uint64_t> step_count_{0};  // written only by the holder of step_mutex_
  std::mutex request_mutex_;                  // guards the two below
  std::optional<std::string> requested_keyframe_;
  ResetRequestHooks reset_request_hooks_;
  std::atomic<bool> reset_requested_{false};
  struct MeasureWindow {  // under stats_mutex_
    double simulated_s = 0.0;
    double elapsed_s = 0.0;
    double measured = 0.0;  // the last full window's factor
    bool full = false;
  } measure_;
  std::atomic<bool> closed_{false};

  // State (see get_state): set by bind(), under a pause after construction.
  void refuse_state_call(const char* what) const;
  std::atomic<int> state_size_{0};
  std::shared_ptr<const ModelIdentity> identity_;
  std::vector<double> state_scratch_;  // set_state's copy of the state it replaces

  // The physics thread, and what every wait for a step boundary waits on (physics_thread.h);
  // the real-time factor's target is its. Last, so that a thread still running goes first.
  PhysicsThread physics_;
};

}  // namespace mjfast
