// PluginHost's dispatch path (plugin_host.h): the per-callback tables of active adapters, the
// generation check, the sampled timing, and a plugin failed live when it raises. Every
// dispatch_* entry point is the one inlined template below, specialised per callback.
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"
#include "plugin_host/plugin_host.h"
#include "plugin_host/plugin_host_internal.h"

namespace mjfast {
namespace {

using plugin_host_detail::Clock;
using plugin_host_detail::control_held_host;
using plugin_host_detail::elapsed_s;
using plugin_host_detail::HeldMark;
using plugin_host_detail::step_locked_host;

std::uint64_t elapsed_ns(Clock::time_point since) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

// A single writer's increment of a counter that other threads read: no locked instruction.
// Always inlined: it runs once per plugin call, where a call to it cost more than the increment.
__attribute__((always_inline)) inline void bump(std::atomic<std::uint64_t>& counter,
                                                std::uint64_t by = 1) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

}  // namespace

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

}  // namespace mjfast
