// PluginHost's plugin state and reports (plugin_host.h): get_states/set_states for a SimState
// (SPEC §20), all or nothing, and report(), which collects each active plugin's statistics().
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"
#include "common/hooks.h"
#include "plugin_host/plugin_host.h"
#include "plugin_host/plugin_host_internal.h"

namespace mjfast {
namespace {

using plugin_host_detail::control_held_host;
using plugin_host_detail::HeldMark;
using plugin_host_detail::step_locked_host;

// The host whose report() is calling a plugin's statistics() on this thread: a report asked for
// from there reads the figures instead of calling statistics() again.
thread_local const PluginHost* statistics_host = nullptr;

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

}  // namespace mjfast
