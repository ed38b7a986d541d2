// PluginHost: owns one generation of plugin adapters, loads them with per-adapter failure
// isolation, and dispatches every callback to them in load order. It owns no model or data (the
// env binds them) and knows adapters only through IPluginAdapter. Defined one concept a file:
// plugin_host.cc (the generation lifecycle), plugin_dispatch.cc (the dispatch path),
// plugin_state.cc (plugin state, reports), plugin_scope.cc (the locks, the acquire scope).
//
// Threads and locks. Two mutexes split the callbacks by the thread that runs them:
//   mutex_          the physics side: every dispatch except update_read/update_write, taken once
//                   per step (StepLock) or per dispatch, on whichever thread steps the env (a
//                   Python thread in env.step, the physics thread, any thread calling mj_forward
//                   on the env's data).
//   control_mutex_  the control side: update_read/update_write, on the control thread. It is
//                   never held by the physics side, so a control loop's plugins never wait for an
//                   mj_step, and a slow control plugin never holds up a step.
// Changing the generation (load_generation, quiesce_and_destroy, the acquire scope) takes both,
// control_mutex_ first. A plugin's failure during dispatch is recorded under the lock of its side
// (a control-side failure also takes mutex_, in the same order); `dispatchable` tells the other
// side's tables that it is out. The factory and each plugin's load() run under both and take the
// GIL; callers holding the GIL release it before waiting on either mutex (their place in the
// core's one lock order: env_core.h). A thread that already holds a mutex (in a dispatch or a
// load) may query the host; a change from there raises std::logic_error instead of deadlocking.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/generation.h"
#include "plugin_host/plugin_adapter.h"

namespace mjfast {

enum class PluginState { kRegistered, kInstantiated, kLoaded, kActive, kFailed, kUnloaded };

struct PluginFailure {
  std::string phase;  // factory, load, statistics, activate, or the callback that raised live
  std::string message;
  std::string traceback;  // where it was raised (a Python plugin's formatted traceback), or ""
};

// What the factory produces for one configured plugin: an adapter, or why there is none.
struct FactoryEntry {
  std::string name;
  std::string type;
  std::unique_ptr<IPluginAdapter> adapter;
  std::string error;      // when adapter is null
  std::string traceback;  // of the error, when there is one
  // When adapter is null because the user interrupted its creation (an Interrupted): the plugin
  // is not failed but left unloaded, the others load, and this is raised once they have.
  std::exception_ptr interrupt;
};

// Call counts and sampled wall times of one callback of one plugin (a copy, for reports).
struct CallbackStats {
  std::uint64_t calls = 0;
  std::uint64_t timed_calls = 0;
  std::uint64_t timed_total_ns = 0;
  std::uint64_t last_ns = 0;
};

struct PluginReport {
  std::string name;
  std::string type;
  PluginState state = PluginState::kRegistered;
  std::optional<PluginFailure> failure;
  double load_time_s = 0.0;
  double reset_time_s = 0.0;
  CallbackMask callbacks = 0;
  std::array<CallbackStats, kCallbackCount> callback_stats{};
  std::array<const char*, kCallbackCount> callback_names{};  // as the adapter names them
  std::map<std::string, double> custom;
  // Why the plugin's statistics() failed in the report that carries it ("" when it did not):
  // live, that is not a failure of the plugin (custom keeps the figures it last gave).
  std::string statistics_error;
};

// What a dispatch returns: null, or the PluginDispatchError of the adapter that raised.
using DispatchError = std::exception_ptr;

// One plugin's part of a SimState (SPEC §20): its value in mjfast's state value encoding
// (python/mjfast/model/state.py).
struct PluginStateEntry {
  std::string name;
  std::string type;
  std::string value;
};

class PluginHost {
 public:
  using Factory = std::function<std::vector<FactoryEntry>(ModelGeneration, PluginGeneration)>;

  // Time one dispatch in kTimingSampleInterval of each callback (and always the first), every
  // plugin of that dispatch: reading the clock around every call would cost more than a native
  // callback itself.
  static constexpr std::uint64_t kTimingSampleInterval = 64;

  PluginHost() = default;
  PluginHost(const PluginHost&) = delete;
  PluginHost& operator=(const PluginHost&) = delete;
  ~PluginHost();

  // Set by the env; called under the host mutex by load_generation.
  void set_factory(Factory factory);
  // The model and data that load() and direct dispatch calls use; the env rebinds them on reload.
  void bind_model(const mjModel* model, mjData* data);

  // Quiesce and destroy the current generation, then create, load, collect statistics of and
  // activate a fresh one. A failure of one adapter in any phase is recorded and skips only it.
  void load_generation(ModelGeneration model_generation, PluginGeneration plugin_generation);
  // Mark the generation inactive, unload every adapter and drop them.
  void quiesce_and_destroy();

  bool generation_active() const;
  ModelGeneration model_generation() const;
  PluginGeneration plugin_generation() const;
  // Whether any active adapter dispatches `callback` (read without the mutex: a hint for fast
  // paths).
  bool has_callback(Callback callback) const {
    return (active_mask_.load(std::memory_order_acquire) & mask_of(callback)) != 0;
  }
  bool has_any_callback() const { return active_mask_.load(std::memory_order_acquire) != 0; }
  // update_read/update_write: dispatched under control_mutex_, not mutex_.
  static constexpr bool is_control_side(Callback callback) {
    return callback == Callback::kUpdateRead || callback == Callback::kUpdateWrite;
  }

  // Holds the host mutex for one env step on this thread, so that the step's dispatches
  // (pre_step, the hooks' control/passive, last_stage) each check the generation under it without
  // re-locking: one lock per step instead of one per dispatch. Dispatch entry points called on
  // this thread meanwhile see the mutex as theirs; other threads wait as before.
  class StepLock {
   public:
    explicit StepLock(PluginHost& host);
    ~StepLock();
    StepLock(const StepLock&) = delete;
    StepLock& operator=(const StepLock&) = delete;

   private:
    PluginHost& host_;
    const PluginHost* previous_;
  };

  // Dispatch entry points. Each checks the generation first, under the host mutex: inactive ->
  // return quietly; active but tagged with another model generation -> StaleGenerationError.
  // An adapter that raises is marked failed, the rest of this dispatch is skipped, and the error
  // (a PluginDispatchError) is returned to the caller, who raises it where unwinding is allowed:
  // null means every adapter returned normally.
  DispatchError dispatch_control(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError dispatch_passive(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError dispatch_render(ModelGeneration tag, const mjModel* m, mjData* d, mjvScene* scene);
  DispatchError dispatch_last_stage(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError dispatch_pre_step(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError dispatch_update_read(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError dispatch_update_write(ModelGeneration tag, const mjModel* m, mjData* d);
  DispatchError notify_geometry_changed(std::optional<ModelGeneration> tag, int geom_id);
  DispatchError reset(std::optional<ModelGeneration> tag);
  // A dispatch of kControl, kPassive, kLastStage or kRender (with `scene`) with the bound model
  // and data, read under the same lock as the generation check (for direct calls, which a reload
  // on another thread may race); any other callback is std::invalid_argument (reset and
  // notify_geometry_changed are the bound dispatches of theirs). Without a tag it is tagged with
  // the active generation.
  DispatchError dispatch_bound(Callback callback, std::optional<ModelGeneration> tag,
                               mjvScene* scene = nullptr);

  // State (SPEC §20), called with stepping paused. Like a change of generation, each takes both
  // mutexes and refuses (std::logic_error) from inside a plugin callback or an acquire_plugin
  // block. A plugin's exception is thrown as PluginDispatchError naming get_state or set_state
  // (an interrupt as it is); the plugin is not failed for it.
  // Whether an active plugin has state (a hint read without the mutex, for fast paths).
  bool has_stateful_plugins() const { return stateful_.load(std::memory_order_acquire); }
  // The states of the active plugins that have one, in load order.
  std::vector<PluginStateEntry> get_states();
  // Restores `states`, which must name exactly the active plugins that have state, each with its
  // type (std::invalid_argument naming the difference otherwise; nothing changed). Each plugin's
  // current state is taken first: when a set_state throws, the plugins already set get theirs
  // back before the error is thrown, so a failure changes nothing.
  void set_states(const std::vector<PluginStateEntry>& states);

  // Every plugin's report, in load order, with each active plugin's statistics() collected
  // now. A plugin's statistics() runs as a plugin callback (hooks::DispatchScope): the host mutex
  // is held, so what would wait for a step, pause the env or change the generation raises
  // std::logic_error there; a report asked for from inside it reads the figures without calling
  // statistics() again.
  std::vector<PluginReport> report() const;

  // Scoped access (env.acquire_plugin): holds both mutexes until release_scope(), so that no
  // dispatch of either side runs meanwhile. Must be released from the thread that acquired it.
  // Inside the scope, the read-only queries work on the owning thread; dispatch, load and quiesce
  // raise std::logic_error there instead of deadlocking.
  void acquire_scope();
  void release_scope();
  bool scope_held_by_this_thread() const;
  // Whether this thread runs inside one of this host's plugin callbacks: it holds a host mutex
  // for a step, a dispatch, a load phase, an unload or a statistics() call (not the acquire
  // scope, which the callers check on their own). Whatever waits for stepping or takes the env's
  // lifecycle lock would deadlock there.
  bool held_by_this_thread() const;
  // With the scope held: the adapter of the active plugin `name`, or null.
  IPluginAdapter* scoped_adapter(const std::string& name) const;

 private:
  // Live counters of one callback of one plugin. Each has a single writer (the dispatch of that
  // callback, under its side's mutex); reports read them from any thread, under mutex_.
  struct LiveStats {
    // Calls of a physics-side callback: written and read only under mutex_, so a plain counter
    // (one instruction per plugin call).
    std::uint64_t locked_calls = 0;
    // Calls of a control-side callback, whose dispatch holds control_mutex_, not mutex_.
    std::atomic<std::uint64_t> calls{0};
    std::atomic<std::uint64_t> timed_calls{0};
    std::atomic<std::uint64_t> timed_total_ns{0};
    std::atomic<std::uint64_t> last_ns{0};
  };

  struct Record {
    PluginReport report;  // fields other than the live counters: under mutex_
    std::array<LiveStats, kCallbackCount> live_stats;
    std::unique_ptr<IPluginAdapter> adapter;
    std::atomic<bool> dispatchable{false};  // active and not failed: read by both sides
  };

  // Locks mutex_ for a query, unless this thread already holds it (acquire scope, a step).
  std::unique_lock<std::mutex> lock_for_query() const;
  // Locks the mutex of `callback`'s side for a dispatch; refuses (std::logic_error) where this
  // thread holds it already.
  std::unique_lock<std::mutex> lock_for_dispatch(Callback callback) const;
  // Locks both mutexes for a change of generation; refuses where this thread holds either.
  std::pair<std::unique_lock<std::mutex>, std::unique_lock<std::mutex>> lock_for_change(
      const char* what) const;

  struct DispatchTable;
  // The dispatch path: lock (unless this thread's StepLock holds the mutex), check the
  // generation, choose whether this dispatch is timed, call the table's adapters in order.
  template <class Invoke>
  DispatchError dispatch(Callback callback, std::optional<ModelGeneration> tag, Invoke&& invoke);
  template <class Invoke>
  DispatchError dispatch_locked(Callback callback, std::optional<ModelGeneration> tag,
                                Invoke& invoke);
  // The (model, data) callbacks: through each adapter's DirectCallback where it has one.
  // `callback` a template argument, so that the inlined dispatch path folds its side's checks.
  template <Callback callback, auto method>
  DispatchError dispatch_model_data(ModelGeneration tag, const mjModel* m, mjData* d);
  template <bool timed, class Invoke>
  DispatchError call_entries(Callback callback, const DispatchTable& table, Invoke& invoke);
  [[noreturn]] __attribute__((noinline, cold)) void throw_stale_generation(
      Callback callback, ModelGeneration tag) const;
  void quiesce_and_destroy_locked();
  // Rebuilds the tables of the physics side, and of the control side if `control_side` (whose
  // tables only a holder of control_mutex_ may touch).
  void rebuild_dispatch_tables_locked(bool control_side);
  DispatchError fail_live_locked(Record& record, Callback callback, std::exception_ptr error);

  mutable std::mutex control_mutex_;
  mutable std::mutex mutex_;
  Factory factory_;
  const mjModel* model_ = nullptr;
  mjData* data_ = nullptr;
  bool generation_active_ = false;
  ModelGeneration model_generation_;
  PluginGeneration plugin_generation_;
  std::vector<std::unique_ptr<Record>> records_;  // load order

  // One callback's active adapters in load order, flattened so that the per-step loop touches
  // only what it needs.
  struct DispatchEntry {
    IPluginAdapter* adapter;
    LiveStats* stats;
    Record* record;
    DirectCallback direct;  // the adapter's plain C function for this callback, if it has one
  };
  struct DispatchTable {
    std::vector<DispatchEntry> entries;
    std::uint64_t dispatches = 0;  // decides which dispatches are timed
  };
  std::array<DispatchTable, kCallbackCount> dispatch_tables_;
  std::atomic<CallbackMask> active_mask_{0};
  std::atomic<bool> stateful_{false};  // an active adapter has_state()

  std::atomic<std::thread::id> scope_owner_{};
};

}  // namespace mjfast
