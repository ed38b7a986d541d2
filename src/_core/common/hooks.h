// MuJoCo's process-wide mjcb_control / mjcb_passive hooks: the compiled trampolines installed in
// them, the registry that resolves a (mjModel*, mjData*) pair to the env that owns it, and the
// ownership check. It owns no plugins and dispatches nothing itself: it hands the call to the env.
#pragma once

#include <mujoco/mujoco.h>

#include <memory>

// For the few thread-locals read on every step: initial-exec reads them straight off the thread
// pointer. The default model for a dlopen'ed library calls __tls_get_addr on every access (~50 ns
// per step across the trampolines); these few bytes fit in the static TLS surplus that glibc
// reserves for such libraries, so only small, hot variables get it.
#define MJFAST_FAST_TLS __attribute__((tls_model("initial-exec")))

namespace mjfast::hooks {

// What a trampoline calls for a pair that belongs to an env.
class HookTarget {
 public:
  virtual ~HookTarget() = default;
  virtual void on_control(const mjModel* m, mjData* d) = 0;
  virtual void on_passive(const mjModel* m, mjData* d) = 0;
};

// The trampolines, to be installed through mujoco.set_mjcb_control / set_mjcb_passive.
extern "C" void control_trampoline(const mjModel* m, mjData* d);
extern "C" void passive_trampoline(const mjModel* m, mjData* d);

// Throws HookOwnershipError naming the hook if either slot no longer holds our trampoline.
void check_owned();
bool control_owned();
bool passive_owned();

// Registry of the pairs that belong to envs; the entry holds the target weakly.
void register_pair(const mjModel* m, mjData* d, std::weak_ptr<HookTarget> target);
void unregister_pair(const mjData* d);

// Set by the thread that steps an env for the duration of its step loop: the trampoline then
// resolves the pair without touching the registry (the common case, lock-free).
class SteppingScope {
 public:
  SteppingScope(const mjModel* m, mjData* d, HookTarget* target);
  ~SteppingScope();
  SteppingScope(const SteppingScope&) = delete;
  SteppingScope& operator=(const SteppingScope&) = delete;

 private:
  const mjModel* previous_model_;
  mjData* previous_data_;
  HookTarget* previous_target_;
};

// Marks the calling thread as inside plugin dispatch of `env` (all envs when null, as in
// `_core.CallbackFree`). A trampoline entered again for that env's pair from inside dispatch (a
// plugin calling mj_forward on its data) does nothing, and API calls that would deadlock or
// re-enter that env's step (step, reset, reload, opening a camera) check in_dispatch_of() and
// refuse. Another env's pair dispatches normally: a plugin may step a second env.
class DispatchScope {
 public:
  explicit DispatchScope(const HookTarget* env = nullptr);
  ~DispatchScope();
  DispatchScope(const DispatchScope&) = delete;
  DispatchScope& operator=(const DispatchScope&) = delete;

 private:
  const HookTarget* previous_;
};
// Whether any plugin dispatch (or a callback-free section) is in progress on this thread.
bool in_dispatch();
// How many dispatches (or callback-free sections) are nested on this thread.
int dispatch_depth();
// Whether `env`'s dispatch (or a callback-free section) is in progress on this thread.
bool in_dispatch_of(const HookTarget* env);

// Marks the calling thread as running a plugin's lifecycle code (factory, load/init, activate,
// unload/cleanup). Unlike DispatchScope it leaves the trampolines and camera opening alone; it
// only lets the simulation-control calls (SPEC section 13) refuse to run from there.
class LifecycleScope {
 public:
  LifecycleScope();
  ~LifecycleScope();
  LifecycleScope(const LifecycleScope&) = delete;
  LifecycleScope& operator=(const LifecycleScope&) = delete;
};
// Inside any plugin callback: a dispatch (step callbacks, reset/on_reset, update_read/write,
// geometry notices) or a lifecycle call.
bool in_plugin_callback();

}  // namespace mjfast::hooks
