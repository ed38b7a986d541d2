// PluginHost's locks (plugin_host.h): the thread's marks of the host mutexes it holds, the
// StepLock of one env step, the locks of a query, a dispatch and a change of generation (each
// refused through call_context where this thread holds it already), and acquire_plugin's scope.
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "common/call_context.h"
#include "plugin_host/plugin_host.h"
#include "plugin_host/plugin_host_internal.h"

namespace mjfast {

namespace plugin_host_detail {
MJFAST_CONSTINIT thread_local const PluginHost* step_locked_host MJFAST_FAST_TLS = nullptr;
MJFAST_CONSTINIT thread_local const PluginHost* control_held_host MJFAST_FAST_TLS = nullptr;
}  // namespace plugin_host_detail

using plugin_host_detail::control_held_host;
using plugin_host_detail::step_locked_host;

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
