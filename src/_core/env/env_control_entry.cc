// EnvCore's control entry (SPEC §7): where control.read()/write() come in, are refused where
// they would deadlock, arm the bridge at a step boundary and run the update_read/update_write
// plugins; ControlBridge holds the buffers.
#include <stdexcept>
#include <string>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {

void EnvCore::arm_control() {
  if (control_.armed()) return;
  hold_steps();
  try {
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.arm(data_);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (...) {
    release_steps();
    throw;
  }
  release_steps();
}

std::unique_lock<std::mutex> EnvCore::enter_control(Callback plugins, const char* what,
                                                    const Blocking& blocking) {
  check_open(what);
  // With plugins the call dispatches, taking the host's control mutex after ours; from inside a
  // plugin callback (which holds the host) or an acquire_plugin block that order would invert,
  // so it is refused there before any lock is taken.
  if (host_.has_callback(plugins) &&
      (call_context::in_callback_of(this) || host_.scope_held_by_this_thread())) {
    call_context::refuse(call_context::Refusal::kControlPlugins, what);
  }
  if (!control_.armed()) blocking([this] { arm_control(); });
  std::unique_lock<std::mutex> lock(control_mutex_, std::try_to_lock);
  if (!lock.owns_lock()) blocking([&lock] { lock.lock(); });
  return lock;
}

template <class Call>
void EnvCore::call_control_plugins(Callback callback, const Blocking& blocking, Call&& call) {
  if (!host_.has_callback(callback)) {
    call(nullptr);
    return;
  }
  // A plugin calling step, reset or a blocking control call of this env from there is refused.
  blocking([&] {
    hooks::DispatchScope dispatching(this);
    // A MuJoCo error in a plugin (mju_error, or mj_kinematics giving up on the scratch data) is
    // thrown into that plugin's dispatch, which fails it like any exception (PluginError), instead
    // of ending the process. It unwinds through the frames that hold the control mutexes.
    const mujoco_guard::Scope guard;
    try {
      call(&host_);
    } catch (...) {
      // MuJoCo may have left a half-done computation (a marked stack) in the scratch data.
      if (guard.caught_error()) control_.reset_scratch();
      throw;
    }
  });
}

void EnvCore::control_read(const Blocking& blocking, const ControlStateUse& use) {
  const auto lock = enter_control(Callback::kUpdateRead, "control.read()", blocking);
  ControlStateView state;
  call_control_plugins(Callback::kUpdateRead, blocking, [&](PluginHost* plugins) {
    state = control_.read_locked(plugins, model_generation());
  });
  use(control_.model(), state);
}

void EnvCore::control_write(const Blocking& blocking, const CommandSource& commands) {
  const auto lock = enter_control(Callback::kUpdateWrite, "control.write()", blocking);
  const Commands staged = commands(control_.model());
  call_control_plugins(Callback::kUpdateWrite, blocking, [&](PluginHost* plugins) {
    control_.write_locked(staged, plugins, model_generation());
  });
}

}  // namespace mjfast
