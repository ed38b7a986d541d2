// The one guard around mjfast's own calls into MuJoCo that can mju_error (mj_step): a
// thread-local log handler catches the error and jumps back to the guard, which reports it
// instead of letting MuJoCo end the process (MuJoCo's Python bindings do the same around every
// call). It owns no simulation state and knows nothing of Python.
//
// Nothing is unwound or jumped over that owns a resource: the jump target is the guard's own
// frame, entered right before mj_step and holding nothing; between it and the jump there are
// only MuJoCo's C frames. An error raised inside plugin code (a native plugin calling MuJoCo
// from a callback that mj_step made) is thrown as a C++ exception instead, so that it unwinds
// through the plugin to its adapter and becomes that plugin's failure.
#pragma once

#include <stdexcept>
#include <string>

#include <mujoco/mujoco.h>

namespace mjfast::mujoco_guard {

// What MuJoCo's error becomes inside plugin code.
class MujocoCallError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs mj_step(m, d). Returns false with MuJoCo's message in `error` if it called mju_error;
// `d` is then in an undefined state until it is reset.
bool step(const mjModel* m, mjData* d, std::string& error);

// Re-installs this thread's handler if a guarded call is in progress on it. Code that may replace
// the thread's MuJoCo log handler (a Python plugin calling mujoco's bindings) calls it after.
void reinstall();

}  // namespace mjfast::mujoco_guard
