// What PluginHost's own files share (plugin_host.cc, plugin_dispatch.cc, plugin_state.cc,
// plugin_scope.cc), and nobody else includes: the thread's marks of the host mutexes it holds,
// and the clock of the load and reset timings.
#pragma once

#include <chrono>

#include "common/hooks.h"
#include "plugin_host/plugin_host.h"

// The marks are read on every dispatch (MJFAST_FAST_TLS, hooks.h) from another file than the one
// that defines them: a declaration that says their initialiser is constant lets the compiler
// read them straight, without the call to a thread-local init wrapper it otherwise emits.
#if defined(__clang__)
#define MJFAST_CONSTINIT [[clang::require_constant_initialization]]
#else
#define MJFAST_CONSTINIT __constinit
#endif

namespace mjfast::plugin_host_detail {

using Clock = std::chrono::steady_clock;

inline double elapsed_s(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// The host whose mutex_ this thread holds (a StepLock, a physics-side dispatch, a load), and the
// host whose control_mutex_ it holds (a control-side dispatch, a load), if any: queries from this
// thread (a plugin asking for statistics) then read without locking, and changes are refused.
// Defined in plugin_scope.cc.
MJFAST_CONSTINIT extern thread_local const PluginHost* step_locked_host MJFAST_FAST_TLS;
MJFAST_CONSTINIT extern thread_local const PluginHost* control_held_host MJFAST_FAST_TLS;

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

}  // namespace mjfast::plugin_host_detail
