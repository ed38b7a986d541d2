#include "common/call_context.h"

#include <array>
#include <utility>

namespace mjfast::call_context {
namespace {

struct Named {
  Refusal kind;
  const char* name;
};
constexpr std::array<Named, 16> kNames{{
    {Refusal::kPluginCallback, "plugin_callback"},
    {Refusal::kStepHold, "step_hold"},
    {Refusal::kAcquireBlock, "acquire_block"},
    {Refusal::kControlPlugins, "control_plugins"},
    {Refusal::kStateCall, "state_call"},
    {Refusal::kSimulationControl, "simulation_control"},
    {Refusal::kOwnCallback, "own_callback"},
    {Refusal::kLifecycle, "lifecycle"},
    {Refusal::kBusyEnvFromCallback, "busy_env_from_callback"},
    {Refusal::kRenderCallback, "render_callback"},
    {Refusal::kAcquireFromCallback, "acquire_from_callback"},
    {Refusal::kAcquireAgain, "acquire_again"},
    {Refusal::kPhysicsThread, "physics_thread"},
    {Refusal::kVectorOwnWorld, "vector_own_world"},
    {Refusal::kBusyVectorFromCallback, "busy_vector_from_callback"},
    {Refusal::kCameraFromStep, "camera_from_step"},
}};

// The innermost lifecycle operation on this thread (a linked stack through the marks).
thread_local LifecycleMark* tls_lifecycle = nullptr;

}  // namespace

std::string refusal(Refusal kind, const std::string& what, const std::string& inside) {
  switch (kind) {
    case Refusal::kPluginCallback: return what + " called from inside a plugin callback";
    case Refusal::kStepHold:
      // The thread holds the env at a step boundary: a plugin's load, reset or unload calling
      // back into the env.
      return what +
             " from inside the env's reset, reload or close (a plugin's load/init, "
             "reset/on_reset or unload/cleanup) would deadlock";
    case Refusal::kAcquireBlock:
      return what + " inside an acquire_plugin() block would deadlock: leave the block first";
    case Refusal::kControlPlugins:
      return what +
             " with control plugins loaded, from inside a plugin callback or an "
             "acquire_plugin() block, would deadlock";
    case Refusal::kStateCall:
      return what +
             " called from inside a plugin callback: a plugin has the model and data in its "
             "callbacks (and get_state/set_state of its own)";
    case Refusal::kSimulationControl:
      return what +
             " called from inside a plugin callback: a plugin has the model and data in its "
             "callbacks, and a native one may request a pause or a reset through its host "
             "services";
    case Refusal::kOwnCallback:
      return what +
             " called from inside a plugin callback of this env (statistics() included) would "
             "deadlock";
    case Refusal::kLifecycle:
      return what + " called from inside " + inside +
             " (a plugin's load/init, reset/on_reset or unload/cleanup calling back into the "
             "env) would recurse or deadlock";
    case Refusal::kBusyEnvFromCallback:
      return what +
             " of an env that is busy, from inside another env's plugin callback: waiting "
             "there could deadlock (two envs stepping each other)";
    case Refusal::kRenderCallback:
      return what +
             " called from a render_callback would deadlock: the capture it runs in holds the "
             "cameras";
    case Refusal::kAcquireFromCallback:
      return what + " called from inside a plugin callback would deadlock: the step holds the host";
    case Refusal::kAcquireAgain: return what + " is already held by this thread";
    case Refusal::kPhysicsThread:
      // Stopping or waiting for the thread from the thread itself would wait for ever.
      return what + " called from a plugin callback on the physics thread";
    case Refusal::kVectorOwnWorld:
      return what +
             " from inside a plugin callback of one of the VectorEnv's own worlds would deadlock";
    case Refusal::kBusyVectorFromCallback:
      // Waiting there could close a cycle (the VectorEnv's lock is first in the lock order).
      return what +
             " of a VectorEnv that is busy, from inside a plugin callback: waiting there could "
             "deadlock";
    case Refusal::kCameraFromStep:
      return what + " called from a step callback: open cameras from load() (or outside callbacks)";
  }
  return what + " refused";
}

void refuse(Refusal kind, const std::string& what, const std::string& inside) {
  throw std::logic_error(refusal(kind, what, inside));
}

Refusal refusal_named(const std::string& name) {
  std::string known;
  for (const Named& named : kNames) {
    if (name == named.name) return named.kind;
    known += known.empty() ? "" : ", ";
    known += named.name;
  }
  throw std::invalid_argument("unknown refusal '" + name + "': expected one of " + known);
}

bool in_plugin_callback() { return hooks::in_plugin_callback(); }

bool in_callback_of(const hooks::HookTarget* env) { return hooks::in_dispatch_of(env); }

LifecycleMark::LifecycleMark(const void* env, std::string operation)
    : env_(env), operation_(std::move(operation)), previous_(tls_lifecycle) {
  check(env, operation_);
  tls_lifecycle = this;
}

LifecycleMark::~LifecycleMark() {
  // Unlinked wherever it is: a Python caller's marks need not end in order.
  for (LifecycleMark** link = &tls_lifecycle; *link != nullptr; link = &(*link)->previous_) {
    if (*link == this) {
      *link = previous_;
      return;
    }
  }
}

const std::string* LifecycleMark::current(const void* env) {
  for (const LifecycleMark* mark = tls_lifecycle; mark != nullptr; mark = mark->previous_) {
    if (mark->env_ == env) return &mark->operation_;
  }
  return nullptr;
}

void LifecycleMark::check(const void* env, const std::string& operation) {
  if (const std::string* inside = current(env)) {
    refuse(Refusal::kLifecycle, "env." + operation + "()", "env." + *inside + "()");
  }
}

}  // namespace mjfast::call_context
