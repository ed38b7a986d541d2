#include "plugin_host.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "call_context.h"
#include "errors.h"
#include "hooks.h"

namespace mjfast {
namespace {

using Clock = std::chrono::steady_clock;

std::uint64_t elapsed_ns(Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

double elapsed_s(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The host whose mutex_ this thread holds (a StepLock, a physics-side dispatch, a load), and the
// host whose control_mutex_ it holds (a control-side dispatch, a load), if any: queries from this
// thread (a plugin asking for statistics) then read without locking, and changes are refused.
// Read on every dispatch: MJFAST_FAST_TLS (hooks.h).
thread_local const PluginHost* step_locked_host MJFAST_FAST_TLS = nullptr;
thread_local const PluginHost* control_held_host MJFAST_FAST_TLS = nullptr;
// The host whose report() is calling a plugin's statistics() on this thread: a report asked for
// from there reads the figures instead of calling statistics() again.
thread_local const PluginHost* statistics_host = nullptr;

// Marks `host` in `slot` for the lifetime of the mark.
class HeldMark {
 public:
  HeldMark(const PluginHost*& slot, const PluginHost* host) : slot_(slot), previous_(slot) {
    slot_ = host;
  }
  ~HeldMark() { slot_ = previous_; }
  HeldMark(const HeldMark&) = delete;
  HeldMark& operator=(const HeldMark&) = delete;

 private:
  const PluginHost*& slot_;
  const PluginHost* previous_;
};

// A single writer's increment of a counter that other threads read: no locked instruction.
// Always inlined: it runs once per plugin call, where a call to it cost more than the increment.
__attribute__((always_inline)) inline void bump(std::atomic<std::uint64_t>& counter,
                                                std::uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// An adapter reports its own unload errors (the Python adapter logs them); one failing unload
// must not keep the others loaded.
void unload_quietly(IPluginAdapter& adapter) {
  try {
    adapter.unload();
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
  }
}

}  // namespace

PluginHost::StepLock::StepLock(PluginHost& host) : host_(host), previous_(step_locked_host) {
  if (previous_ == &host_) return;  // nested: the outer lock already holds it
  host_.mutex_.lock();
  step_locked_host = &host_;
}

PluginHost::StepLock::~StepLock() {
  if (previous_ == &host_) return;
  step_locked_host = previous_;
  host_.mutex_.unlock();
}

std::string describe_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown C++ exception";
  }
}

std::string traceback_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const TracebackCarrier& carrier) {
    return carrier.traceback();
  } catch (...) {
    return {};
  }
}

namespace {

// The failure record of the exception being handled.
PluginFailure failure_of(std::string phase, const std::exception_ptr& error) {
  return PluginFailure{std::move(phase), describe_exception(error), traceback_of(error)};
}

// Runs one phase of one plugin's load (load, statistics, activate): `body` calls the adapter.
// What it raises is the plugin's failure in `phase`, recorded in the report; the plugin's state
// is the caller's to settle. The user's interrupt is not its failure: the plugin is left
// UNLOADED (unloaded first if `unload_on_interrupt`: its load had completed), the others load,
// and `first_interrupt` keeps the first one, to be raised once the generation is up. A forced
// unwind (thread cancellation) passes through. Returns false when the phase was interrupted.
template <class Body>
bool run_load_phase(const char* phase, PluginReport& report,
                    std::unique_ptr<IPluginAdapter>& adapter, bool unload_on_interrupt,
                    std::exception_ptr& first_interrupt, Body&& body) {
  try {
    body();
    return true;
  } catch (const Interrupted&) {
    if (!first_interrupt) first_interrupt = std::current_exception();
    report.state = PluginState::kUnloaded;
    if (unload_on_interrupt) unload_quietly(*adapter);
    adapter.reset();
    return false;
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    report.failure = failure_of(phase, std::current_exception());
    return true;
  }
}

}  // namespace

PluginHost::~PluginHost() {
  std::lock_guard<std::mutex> control_lock(control_mutex_);
  std::lock_guard<std::mutex> lock(mutex_);
  const HeldMark held(step_locked_host, this);
  const HeldMark control_held(control_held_host, this);
  quiesce_and_destroy_locked();
}

void PluginHost::set_factory(Factory factory) {
  std::lock_guard<std::mutex> lock(mutex_);
  factory_ = std::move(factory);
}

void PluginHost::bind_model(const mjModel* model, mjData* data) {
  std::lock_guard<std::mutex> lock(mutex_);
  model_ = model;
  data_ = data;
}

bool PluginHost::generation_active() const {
  const auto lock = lock_for_query();
  return generation_active_;
}

ModelGeneration PluginHost::model_generation() const {
  const auto lock = lock_for_query();
  return model_generation_;
}

PluginGeneration PluginHost::plugin_generation() const {
  const auto lock = lock_for_query();
  return plugin_generation_;
}

void PluginHost::quiesce_and_destroy() {
  const auto locks = lock_for_change("quiesce_and_destroy()");
  const hooks::LifecycleScope lifecycle;  // unload()/cleanup() run below
  // An unload() asking the env for its plugins reads, not waits.
  const HeldMark held(step_locked_host, this);
  const HeldMark control_held(control_held_host, this);
  quiesce_and_destroy_locked();
}

void PluginHost::quiesce_and_destroy_locked() {
  generation_active_ = false;
  for (auto& table : dispatch_tables_) table.entries.clear();
  active_mask_.store(0, std::memory_order_release);
  stateful_.store(false, std::memory_order_release);
  for (auto& record : records_) {
    record->dispatchable.store(false, std::memory_order_release);
    if (record->adapter) {
      unload_quietly(*record->adapter);
      record->adapter.reset();
    }
    // The records stay, for statistics, until the next generation replaces them; a failed
    // plugin stays FAILED with its failure.
    if (record->report.state != PluginState::kFailed) {
      record->report.state = PluginState::kUnloaded;
    }
  }
}

void PluginHost::load_generation(ModelGeneration model_generation,
                                 PluginGeneration plugin_generation) {
  const auto locks = lock_for_change("load_generation()");
  const hooks::LifecycleScope lifecycle;  // the factory, load()/init(), activate() and unload()
  // A load() asking the env for its plugins reads, not waits.
  const HeldMark held(step_locked_host, this);
  const HeldMark control_held(control_held_host, this);
  quiesce_and_destroy_locked();
  records_.clear();
  model_generation_ = model_generation;
  plugin_generation_ = plugin_generation;
  std::vector<FactoryEntry> entries;
  std::exception_ptr interrupt;  // the first Interrupted of a plugin's load phases
  try {
    if (factory_) entries = factory_(model_generation, plugin_generation);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    // The factory itself failed (not one plugin): the generation is up, empty, so that dispatch
    // keeps its contract; the caller learns why.
    generation_active_ = true;
    throw;
  }
  for (FactoryEntry& entry : entries) {
    auto record = std::make_unique<Record>();
    record->report.name = std::move(entry.name);
    record->report.type = std::move(entry.type);
    record->adapter = std::move(entry.adapter);
    PluginReport& report = record->report;
    records_.push_back(std::move(record));
    Record& current = *records_.back();

    if (!current.adapter) {
      if (entry.interrupt) {
        // The user interrupted its creation: not its failure (as for load below).
        if (!interrupt) interrupt = entry.interrupt;
        report.state = PluginState::kUnloaded;
        continue;
      }
      report.state = PluginState::kFailed;
      report.failure = PluginFailure{"factory", entry.error, entry.traceback};
      continue;
    }
    report.state = PluginState::kInstantiated;

    const auto load = [&] {
      if (!current.adapter->load(model_, data_)) {
        report.failure = PluginFailure{"load", "load() returned false", ""};
      }
    };
    const auto load_start = Clock::now();
    const bool loaded = run_load_phase("load", report, current.adapter,
                                       /*unload_on_interrupt=*/false, interrupt, load);
    report.load_time_s = elapsed_s(load_start);
    if (!loaded) continue;
    if (report.failure) {
      report.state = PluginState::kFailed;
      current.adapter.reset();  // never loaded: nothing to unload
      continue;
    }
    report.state = PluginState::kLoaded;

    // Its callbacks count only once its statistics() answered: a plugin failed or interrupted
    // here dispatches nothing.
    const auto collect_statistics = [&] {
      const CallbackMask callbacks = current.adapter->callbacks();
      for (std::size_t i = 0; i < kCallbackCount; ++i) {
        report.callback_names[i] = current.adapter->name_of(static_cast<Callback>(i));
      }
      report.custom = current.adapter->statistics();
      report.callbacks = callbacks;
    };
    run_load_phase("statistics", report, current.adapter, /*unload_on_interrupt=*/true, interrupt,
                   collect_statistics);
  }

  // Activate only once every plugin has loaded, so a plugin's activate() may rely on its
  // neighbours being loaded.
  for (auto& record : records_) {
    PluginReport& report = record->report;
    if (report.state == PluginState::kLoaded && !report.failure) {
      const auto activate = [&] {
        if (record->adapter->activate()) {
          report.state = PluginState::kActive;
        } else {
          report.failure = PluginFailure{"activate", "activate() returned false", ""};
        }
      };
      run_load_phase("activate", report, record->adapter, /*unload_on_interrupt=*/true, interrupt,
                     activate);
    }
    if (report.failure && record->adapter) {
      report.state = PluginState::kFailed;
      unload_quietly(*record->adapter);
      record->adapter.reset();
    }
  }
  for (auto& record : records_) {
    record->dispatchable.store(record->report.state == PluginState::kActive,
                               std::memory_order_release);
  }
  rebuild_dispatch_tables_locked(/*control_side=*/true);
  generation_active_ = true;
  if (interrupt) std::rethrow_exception(interrupt);
}

void PluginHost::rebuild_dispatch_tables_locked(bool control_side) {
  CallbackMask active = 0;
  for (std::size_t i = 0; i < kCallbackCount; ++i) {
    const auto callback = static_cast<Callback>(i);
    const bool rebuild = control_side || !is_control_side(callback);
    if (rebuild) dispatch_tables_[i].entries.clear();
    for (auto& record : records_) {
      if (!record->dispatchable.load(std::memory_order_acquire)) continue;
      if (!(record->report.callbacks & mask_of(callback))) continue;
      active |= mask_of(callback);
      if (rebuild) {
        dispatch_tables_[i].entries.push_back(
            {record->adapter.get(), &record->live_stats[i], record.get(),
             takes_model_and_data(callback) ? record->adapter->direct(callback)
                                            : DirectCallback{}});
      }
    }
  }
  active_mask_.store(active, std::memory_order_release);
  bool stateful = false;
  for (auto& record : records_) {
    stateful = stateful || (record->dispatchable.load(std::memory_order_acquire) &&
                            record->adapter->has_state());
  }
  stateful_.store(stateful, std::memory_order_release);
}

DispatchError PluginHost::fail_live_locked(Record& record, Callback callback,
                                           std::exception_ptr error) {
  // A control-side failure also takes mutex_ (control_mutex_ is held: the order is kept): the
  // record's report and the physics side's tables are mutex_'s.
  std::unique_lock<std::mutex> physics_lock;
  if (is_control_side(callback) && step_locked_host != this) {
    physics_lock = std::unique_lock<std::mutex>(mutex_);
  }
  const std::string message = describe_exception(error);
  const char* name = record.adapter->name_of(callback);
  PluginReport& report = record.report;
  report.state = PluginState::kFailed;
  report.failure = PluginFailure{name, message, traceback_of(error)};
  // A plugin that raised is out of this generation: it would most likely raise again every step.
  // It is unloaded at the next quiesce (it keeps its adapter until then, since it did load).
  record.dispatchable.store(false, std::memory_order_release);
  rebuild_dispatch_tables_locked(/*control_side=*/is_control_side(callback));
  return std::make_exception_ptr(
      PluginDispatchError(report.name, report.type, name, message, error));
}

void PluginHost::throw_stale_generation(Callback callback, ModelGeneration tag) const {
  throw StaleGenerationError("dispatch of " + std::string(callback_name(callback)) +
                             " tagged with model generation " + std::to_string(tag.value()) +
                             ", but generation " + std::to_string(model_generation_.value()) +
                             " is active");
}

// Inlined into each dispatch_*: the plugin loop then keeps the model and data in registers, and
// the common case (this thread's StepLock holds mutex_) takes neither a lock nor a mark.
template <class Invoke>
__attribute__((always_inline)) inline DispatchError PluginHost::dispatch(
    Callback callback, std::optional<ModelGeneration> tag, Invoke&& invoke) {
  const bool control_side = is_control_side(callback);
  if (!control_side && step_locked_host == this) return dispatch_locked(callback, tag, invoke);
  const std::unique_lock<std::mutex> lock = lock_for_dispatch(callback);
  const HeldMark held(control_side ? control_held_host : step_locked_host, this);
  return dispatch_locked(callback, tag, invoke);
}

template <class Invoke>
__attribute__((always_inline)) inline DispatchError PluginHost::dispatch_locked(
    Callback callback, std::optional<ModelGeneration> tag, Invoke& invoke) {
  if (!generation_active_) return nullptr;
  if (tag && *tag != model_generation_) throw_stale_generation(callback, *tag);
  DispatchTable& table = dispatch_tables_[index_of(callback)];
  if (table.dispatches++ % kTimingSampleInterval != 0) [[likely]] {
    return call_entries</*timed=*/false>(callback, table, invoke);
  }
  return call_entries</*timed=*/true>(callback, table, invoke);
}

template <bool timed, class Invoke>
__attribute__((always_inline)) inline DispatchError PluginHost::call_entries(
    Callback callback, const DispatchTable& table, Invoke& invoke) {
  const bool control_side = is_control_side(callback);
  for (const DispatchEntry& entry : table.entries) {
    // The control side's tables are not rebuilt when the physics side fails a plugin.
    if (control_side && !entry.record->dispatchable.load(std::memory_order_acquire)) continue;
    LiveStats& stats = *entry.stats;
    if (control_side) {
      bump(stats.calls);
    } else {
      ++stats.locked_calls;
    }
    try {
      if constexpr (!timed) {  // the common case: no clock
        invoke(entry);
      } else {
        const auto start = Clock::now();
        invoke(entry);
        const std::uint64_t took = elapsed_ns(start);
        stats.last_ns.store(took, std::memory_order_relaxed);
        bump(stats.timed_total_ns, took);
        bump(stats.timed_calls);
      }
    } catch (const Interrupted&) {
      // The user's interrupt, not the plugin's failure: it stays as it was; the rest of this
      // dispatch is skipped and the interrupt raised where unwinding is allowed.
      return std::current_exception();
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      // The table was rebuilt without this adapter: stop iterating it.
      return fail_live_locked(*entry.record, callback, std::current_exception());
    }
  }
  return nullptr;
}

namespace {

// One plugin's (model, data) callback: its plain C function where the adapter has one (a native
// plugin: one indirect call), else the adapter's virtual `method`.
template <auto method, class Entry>
__attribute__((always_inline)) inline void call_model_data(const Entry& entry, const mjModel* m,
                                                           mjData* d) {
  if (const DirectCallback& direct = entry.direct; direct.function != nullptr) {
    if (const int status = direct.function(direct.instance, m, d, direct.error)) [[unlikely]] {
      entry.adapter->direct_failed(status);
    }
  } else {
    (entry.adapter->*method)(m, d);
  }
}

}  // namespace

template <Callback callback, auto method>
DispatchError PluginHost::dispatch_model_data(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch(callback, tag,
                  [&](const DispatchEntry& entry) { call_model_data<method>(entry, m, d); });
}

DispatchError PluginHost::dispatch_control(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kControl, &IPluginAdapter::control>(tag, m, d);
}

DispatchError PluginHost::dispatch_passive(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kPassive, &IPluginAdapter::passive>(tag, m, d);
}

DispatchError PluginHost::dispatch_render(ModelGeneration tag, const mjModel* m, mjData* d,
                                          mjvScene* scene) {
  return dispatch(Callback::kRender, tag,
                  [&](const DispatchEntry& entry) { entry.adapter->render(m, d, scene); });
}

DispatchError PluginHost::dispatch_last_stage(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kLastStage, &IPluginAdapter::last_stage>(tag, m, d);
}

DispatchError PluginHost::dispatch_pre_step(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kPreStep, &IPluginAdapter::pre_step>(tag, m, d);
}

DispatchError PluginHost::dispatch_update_read(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kUpdateRead, &IPluginAdapter::update_read>(tag, m, d);
}

DispatchError PluginHost::dispatch_update_write(ModelGeneration tag, const mjModel* m, mjData* d) {
  return dispatch_model_data<Callback::kUpdateWrite, &IPluginAdapter::update_write>(tag, m, d);
}

DispatchError PluginHost::dispatch_bound(Callback callback, std::optional<ModelGeneration> tag,
                                         mjvScene* scene) {
  // model_ and data_ are read inside the dispatch, under the lock that checks the generation.
  switch (callback) {
    case Callback::kControl:
      return dispatch(callback, tag, [&](const DispatchEntry& entry) {
        call_model_data<&IPluginAdapter::control>(entry, model_, data_);
      });
    case Callback::kPassive:
      return dispatch(callback, tag, [&](const DispatchEntry& entry) {
        call_model_data<&IPluginAdapter::passive>(entry, model_, data_);
      });
    case Callback::kLastStage:
      return dispatch(callback, tag, [&](const DispatchEntry& entry) {
        call_model_data<&IPluginAdapter::last_stage>(entry, model_, data_);
      });
    case Callback::kRender:
      return dispatch(callback, tag, [&](const DispatchEntry& entry) {
        entry.adapter->render(model_, data_, scene);
      });
    default:
      throw std::invalid_argument(std::string("dispatch_bound() dispatches control, passive, "
                                              "last_stage or render, not ") +
                                  callback_name(callback));
  }
}

DispatchError PluginHost::notify_geometry_changed(std::optional<ModelGeneration> tag, int geom_id) {
  return dispatch(Callback::kGeomChanged, tag, [&](const DispatchEntry& entry) {
    entry.adapter->geom_changed(model_, data_, geom_id);
  });
}

DispatchError PluginHost::reset(std::optional<ModelGeneration> tag) {
  return dispatch(Callback::kReset, tag, [&](const DispatchEntry& entry) {
    const auto start = Clock::now();
    call_model_data<&IPluginAdapter::reset>(entry, model_, data_);
    // under mutex_: reset is a physics-side dispatch
    entry.record->report.reset_time_s += elapsed_s(start);
  });
}

namespace {

// A plugin's get_state/set_state error as the caller sees it: an interrupt as it is, anything
// else as a PluginDispatchError naming the plugin and the call.
[[noreturn]] void throw_state_error(const PluginReport& report, const char* call,
                                    std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Interrupted&) {
    throw;
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
  }
  throw PluginDispatchError(report.name, report.type, call, describe_exception(error), error);
}

}  // namespace

std::vector<PluginStateEntry> PluginHost::get_states() {
  const auto locks = lock_for_change("get_state()");
  const HeldMark held(step_locked_host, this);
  const HeldMark control_held(control_held_host, this);
  std::vector<PluginStateEntry> states;
  for (auto& record : records_) {
    if (!record->dispatchable.load(std::memory_order_acquire) || !record->adapter->has_state()) {
      continue;
    }
    try {
      states.push_back({record->report.name, record->report.type, record->adapter->get_state()});
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      throw_state_error(record->report, "get_state", std::current_exception());
    }
  }
  return states;
}

void PluginHost::set_states(const std::vector<PluginStateEntry>& states) {
  const auto locks = lock_for_change("set_state()");
  const HeldMark held(step_locked_host, this);
  const HeldMark control_held(control_held_host, this);
  // Which record each entry goes to, all matched before anything changes.
  std::vector<Record*> targets;
  std::string stateful_names;
  for (auto& record : records_) {
    if (!record->dispatchable.load(std::memory_order_acquire) || !record->adapter->has_state()) {
      continue;
    }
    stateful_names += (stateful_names.empty() ? "'" : ", '") + record->report.name + "'";
  }
  if (stateful_names.empty()) stateful_names = "none";
  for (const PluginStateEntry& entry : states) {
    Record* target = nullptr;
    for (auto& record : records_) {
      if (record->report.name == entry.name) target = record.get();
    }
    if (target == nullptr || !target->dispatchable.load(std::memory_order_acquire) ||
        !target->adapter->has_state()) {
      throw std::invalid_argument(
          "the state holds plugin '" + entry.name + "' (" + entry.type + "), which this env " +
          (target == nullptr ? "does not have"
                             : "has without state, or not active (" + target->report.type + ")") +
          " (this env's active plugins with state: " + stateful_names + ")");
    }
    if (target->report.type != entry.type) {
      throw std::invalid_argument("the state's plugin '" + entry.name + "' is a " + entry.type +
                                  ", this env's is a " + target->report.type);
    }
    if (std::find(targets.begin(), targets.end(), target) != targets.end()) {
      throw std::invalid_argument("the state holds plugin '" + entry.name + "' twice");
    }
    targets.push_back(target);
  }
  for (auto& record : records_) {
    if (!record->dispatchable.load(std::memory_order_acquire) || !record->adapter->has_state()) {
      continue;
    }
    if (std::find(targets.begin(), targets.end(), record.get()) == targets.end()) {
      throw std::invalid_argument("the state has nothing for plugin '" + record->report.name +
                                  "' (" + record->report.type +
                                  "), which has state in this env (a state from an env "
                                  "configured with other plugins?)");
    }
  }
  // What each plugin holds now, to put back if a later one refuses its state.
  std::vector<std::string> previous;
  previous.reserve(targets.size());
  for (Record* target : targets) {
    try {
      previous.push_back(target->adapter->get_state());
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      throw_state_error(target->report, "get_state", std::current_exception());
    }
  }
  for (std::size_t i = 0; i < targets.size(); ++i) {
    try {
      targets[i]->adapter->set_state(states[i].value);
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      const std::exception_ptr error = std::current_exception();
      // A set_state that throws leaves its plugin as it was: put back the ones before it.
      for (std::size_t j = 0; j < i; ++j) {
        try {
          targets[j]->adapter->set_state(previous[j]);
        }
        MJFAST_RETHROW_FORCED_UNWIND
        catch (...) {
          // Its own state, which it gave a moment ago: nothing better is left to do.
        }
      }
      throw_state_error(targets[i]->report, "set_state", error);
    }
  }
}

std::vector<PluginReport> PluginHost::report() const {
  const auto lock = lock_for_query();
  // Asked for from inside a plugin's statistics(): the figures as they are, no second call.
  const bool collect = statistics_host != this;
  std::vector<PluginReport> reports;
  reports.reserve(records_.size());
  for (const auto& record : records_) {
    if (collect && record->adapter && record->report.state == PluginState::kActive) {
      // A plugin's own figures as of now (collected at load too, for the statistics phase). No
      // physics-side dispatch runs meanwhile (mutex_ is held or this thread's). statistics() is a
      // plugin callback like the others: this thread holds the host mutex, so whatever would
      // wait on a lock after it (stepping, pausing, reset, reload, close, a control call with
      // control plugins, acquire_plugin) must raise instead; the marks make each of them refuse.
      // One that fails keeps the figures it last gave and says why: a report is not worth
      // failing a plugin over.
      const HeldMark held(step_locked_host, this);
      const HeldMark control_held(control_held_host, this);
      const HeldMark in_statistics(statistics_host, this);
      const hooks::DispatchScope dispatching;
      try {
        record->report.custom = record->adapter->statistics();
        record->report.statistics_error.clear();
      }
      MJFAST_RETHROW_FORCED_UNWIND
      catch (const Interrupted&) {
        throw;
      }
      catch (...) {
        record->report.statistics_error = describe_exception(std::current_exception());
      }
    }
    PluginReport report = record->report;
    for (std::size_t i = 0; i < kCallbackCount; ++i) {
      const LiveStats& live = record->live_stats[i];
      report.callback_stats[i] = {live.locked_calls + live.calls.load(std::memory_order_relaxed),
                                  live.timed_calls.load(std::memory_order_relaxed),
                                  live.timed_total_ns.load(std::memory_order_relaxed),
                                  live.last_ns.load(std::memory_order_relaxed)};
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

std::unique_lock<std::mutex> PluginHost::lock_for_query() const {
  if (scope_held_by_this_thread() || step_locked_host == this) {
    return std::unique_lock<std::mutex>();  // already ours
  }
  return std::unique_lock<std::mutex>(mutex_);
}

std::unique_lock<std::mutex> PluginHost::lock_for_dispatch(Callback callback) const {
  const bool control_side = is_control_side(callback);
  if (scope_held_by_this_thread()) {
    call_context::refuse(call_context::Refusal::kAcquireBlock, callback_name(callback));
  }
  if ((control_side ? control_held_host : step_locked_host) == this) {
    call_context::refuse(call_context::Refusal::kPluginCallback, callback_name(callback));
  }
  return std::unique_lock<std::mutex>(control_side ? control_mutex_ : mutex_);
}

std::pair<std::unique_lock<std::mutex>, std::unique_lock<std::mutex>> PluginHost::lock_for_change(
    const char* what) const {
  if (step_locked_host == this || control_held_host == this) {
    call_context::refuse(call_context::Refusal::kPluginCallback, what);
  }
  if (scope_held_by_this_thread()) call_context::refuse(call_context::Refusal::kAcquireBlock, what);
  std::unique_lock<std::mutex> control_lock(control_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  return {std::move(control_lock), std::move(lock)};
}

void PluginHost::acquire_scope() {
  if (scope_held_by_this_thread()) {
    call_context::refuse(call_context::Refusal::kAcquireAgain, "acquire_plugin()");
  }
  if (step_locked_host == this || control_held_host == this) {
    call_context::refuse(call_context::Refusal::kAcquireFromCallback, "acquire_plugin()");
  }
  control_mutex_.lock();
  mutex_.lock();
  scope_owner_.store(std::this_thread::get_id());
}

void PluginHost::release_scope() {
  if (scope_owner_.load() != std::this_thread::get_id()) {
    throw std::logic_error("acquire_plugin scope released from a thread that does not hold it");
  }
  scope_owner_.store(std::thread::id{});
  mutex_.unlock();
  control_mutex_.unlock();
}

bool PluginHost::scope_held_by_this_thread() const {
  // The hooks ask on every control/passive call: with no scope held anywhere (the common case)
  // the answer needs no call for this thread's id.
  const std::thread::id owner = scope_owner_.load();
  return owner != std::thread::id{} && owner == std::this_thread::get_id();
}

bool PluginHost::held_by_this_thread() const {
  return step_locked_host == this || control_held_host == this;
}

IPluginAdapter* PluginHost::scoped_adapter(const std::string& name) const {
  for (const auto& record : records_) {
    if (record->report.name == name && record->report.state == PluginState::kActive) {
      return record->adapter.get();
    }
  }
  return nullptr;
}

}  // namespace mjfast
