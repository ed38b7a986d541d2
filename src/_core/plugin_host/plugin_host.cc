// PluginHost's generation lifecycle (plugin_host.h): a generation created by the factory, each
// plugin loaded, its statistics collected and activated with per-plugin failure isolation, and
// quiesced and destroyed at the next load or close. The dispatch path is in plugin_dispatch.cc,
// plugin state and reports in plugin_state.cc, the locks and the acquire scope in plugin_scope.cc.
#include "plugin_host/plugin_host.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"
#include "common/hooks.h"
#include "plugin_host/plugin_host_internal.h"

namespace mjfast {
namespace {

using plugin_host_detail::Clock;
using plugin_host_detail::control_held_host;
using plugin_host_detail::elapsed_s;
using plugin_host_detail::HeldMark;
using plugin_host_detail::step_locked_host;

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

}  // namespace mjfast
