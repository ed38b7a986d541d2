// The one guard around mjfast's own calls into MuJoCo that can mju_error (mj_step, and what
// plugins and the render turn call while an env steps): a thread-local MuJoCo log handler catches
// the error and either jumps back to the guarded mj_step, which reports it instead of letting
// MuJoCo end the process (MuJoCo's Python bindings do the same around every call), or throws.
// It owns no simulation state and knows nothing of Python.
//
// Nothing is unwound or jumped over that owns a resource: the jump target is step()'s own frame,
// entered right before mj_step and holding nothing; between it and the jump there are only
// MuJoCo's C frames. An error raised anywhere else inside a Scope (plugin code called from
// mj_step's callbacks, pre_step and last_stage plugins, the render turn, the control side's
// update_read/update_write dispatch, the render thread's mjr_* calls) is thrown as MujocoCallError
// instead, so that it unwinds through its caller's frames and their locks: nothing ever jumps
// over a frame that owns a lock.
#pragma once

#include <mujoco/mujoco.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace mjfast::mujoco_guard {

// What MuJoCo's error becomes outside a guarded mj_step.
class MujocoCallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Installs the handler on this thread for its lifetime (a stepping loop, a control-side dispatch,
// the render thread, a native plugin's call from a user thread), restoring the one it replaced.
// Scopes nest.
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Whether MuJoCo raised an error on this thread since this scope began (the data MuJoCo was
  // working on may then hold a half-done computation).
  bool caught_error() const;

 private:
  mjfLogHandler previous_handler_;
  mjfLogHandler outer_previous_;
  bool outer_active_;
  std::uint64_t errors_at_start_;
};

// Runs mj_step(m, d); call it inside a Scope (it installs none itself: without one, MuJoCo's error
// goes to whatever handler the thread has). Returns false with MuJoCo's message in `error` if it
// called mju_error; `d` is then in an undefined state until it is reset.
bool step(const mjModel* m, mjData* d, std::string& error);

// Re-installs this thread's handler if a Scope is active on it. Code that may replace the
// thread's MuJoCo log handler (a Python plugin calling mujoco's bindings) calls it after.
void reinstall();

}  // namespace mjfast::mujoco_guard
