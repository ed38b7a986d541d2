// The calling thread's context, and THE ONE PLACE where a call that would wait on a lock its own
// thread holds is refused (SPEC §18: refused with mjfast.LogicError, never waited for). What a
// thread can be inside: a plugin callback of env X (hooks.h's DispatchScope/LifecycleScope), env
// X's step hold (EnvCore::hold_steps), an acquire_plugin block of X's host (PluginHost's scope)
// or a lifecycle operation of X (env.reset/reload/close/..., marked here by LifecycleMark). Every
// refusal message is built by refusal() below; Python's checks reach the same builder through
// _core.refusal and EnvCore.check_call (bind_env.cc). The lock order is in env_core.h.
#pragma once

#include <stdexcept>
#include <string>

#include "common/hooks.h"

namespace mjfast::call_context {

// What a refused call is inside of; each has one message, refusal(kind, what, inside).
enum class Refusal {
  kPluginCallback,       // a plugin callback (the host's dispatch marks of this thread)
  kStepHold,             // this env's step hold: its reset, reload or close
  kAcquireBlock,         // an acquire_plugin() block of this env's host
  kControlPlugins,       // a blocking control call, from a callback or an acquire block
  kStateCall,            // get_state/set_state from a plugin callback
  kSimulationControl,    // SPEC §13 calls from any plugin callback (load/reset included)
  kOwnCallback,          // a lifecycle call from this env's own callback
  kLifecycle,            // a lifecycle call inside another of this env's (`inside`)
  kBusyEnvFromCallback,  // step() of a busy env from another env's callback
  kRenderCallback,       // a camera binding call from a render_callback
  kAcquireFromCallback,  // acquire_plugin() from inside a plugin callback
  kAcquireAgain,         // acquire_plugin() while this thread holds it
  kPhysicsThread,        // stop() or wait() on the env's own physics thread (a plugin's callback)
  kVectorOwnWorld,       // a VectorEnv call from one of its own worlds (a worker of its pool)
  kBusyVectorFromCallback,  // a call of a busy VectorEnv from inside a plugin callback
  kCameraFromStep,          // opening an offscreen camera from a step callback
};

// The message of a refusal of `what` (a call, as the user wrote it: "step()", "env.reset()"),
// `inside` naming the operation it is inside where the kind needs one (kLifecycle).
std::string refusal(Refusal kind, const std::string& what, const std::string& inside = "");
// Throws std::logic_error (mjfast.LogicError) with refusal(kind, what, inside).
[[noreturn]] void refuse(Refusal kind, const std::string& what, const std::string& inside = "");
// Refusal's name as Python passes it to _core.refusal ("plugin_callback", "acquire_block", ...),
// or std::invalid_argument listing the names.
Refusal refusal_named(const std::string& name);

// Whether this thread is inside any plugin callback (dispatch or lifecycle code).
bool in_plugin_callback();
// Whether this thread is inside `env`'s plugin dispatch (or a callback-free section).
bool in_callback_of(const hooks::HookTarget* env);

// Marks this thread as inside lifecycle operation `operation` of `env` for its lifetime; refuses
// (kLifecycle) when the thread is inside one of `env`'s already (a plugin's load, reset or
// unload calling back into its env would recurse or deadlock). Lifecycles of different envs nest.
class LifecycleMark {
 public:
  LifecycleMark(const void* env, std::string operation);
  ~LifecycleMark();
  LifecycleMark(const LifecycleMark&) = delete;
  LifecycleMark& operator=(const LifecycleMark&) = delete;

  // The operation this thread is inside for `env`, or null.
  static const std::string* current(const void* env);
  // Refuses `operation` (kLifecycle) if this thread is inside one of `env`'s.
  static void check(const void* env, const std::string& operation);

 private:
  const void* env_;
  std::string operation_;
  LifecycleMark* previous_;
};

}  // namespace mjfast::call_context
