#include "mujoco_guard.h"

#include <csetjmp>
#include <cstring>

#include "hooks.h"

// MuJoCo's thread-local log handler, as its own Python bindings use it (not in the public header).
extern "C" {
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
}

namespace mjfast::mujoco_guard {
namespace {

// The guarded call in progress on this thread: where to jump, and the handler it replaced.
thread_local std::jmp_buf* tls_jump = nullptr;
thread_local int tls_jump_dispatch_depth = 0;  // the dispatch depth the jump target was set at
thread_local mjfLogHandler tls_previous = nullptr;
thread_local char tls_message[sizeof(mjLogMessage::subject)];

void handle(const mjLogMessage* message) {
  if (message->level < mjLOG_ERROR) {
    // Warnings and info go where they would have gone without the guard.
    const mjfLogHandler mine = _mjPRIVATE_setTlsLogHandler(tls_previous);
    mju_message(message);
    _mjPRIVATE_setTlsLogHandler(mine);
    return;
  }
  std::strncpy(tls_message, message->subject, sizeof(tls_message) - 1);
  tls_message[sizeof(tls_message) - 1] = '\0';
  if (tls_jump == nullptr || hooks::dispatch_depth() != tls_jump_dispatch_depth) {
    // Inside a plugin's callback that the guarded call made: the plugin's own frames (and the
    // host's, with their locks) are between here and the guard, so unwind through them instead
    // of jumping over them.
    throw MujocoCallError(std::string("MuJoCo error: ") + tls_message);
  }
  std::longjmp(*tls_jump, 1);
}

// No automatic object with a destructor lives in this frame (setjmp's rule), and it is never
// inlined into a caller that has them.
__attribute__((noinline)) bool step_with_jump(const mjModel* m, mjData* d) {
  std::jmp_buf jump;
  // Set before setjmp and never changed after it, so they hold their values after the jump. A
  // guarded call may nest (a plugin stepping another env): the outer one's state comes back.
  std::jmp_buf* const outer_jump = tls_jump;
  const int outer_depth = tls_jump_dispatch_depth;
  const mjfLogHandler outer_previous = tls_previous;
  const mjfLogHandler previous = _mjPRIVATE_setTlsLogHandler(&handle);
  tls_jump = &jump;
  tls_jump_dispatch_depth = hooks::dispatch_depth();
  tls_previous = previous == &handle ? outer_previous : previous;
  const auto leave = [&] {
    tls_jump = outer_jump;
    tls_jump_dispatch_depth = outer_depth;
    tls_previous = outer_previous;
    _mjPRIVATE_setTlsLogHandler(previous);
  };
  if (setjmp(jump) == 0) {
    mj_step(m, d);
    leave();
    return true;
  }
  leave();  // reached by the handler's longjmp
  return false;
}

}  // namespace

bool step(const mjModel* m, mjData* d, std::string& error) {
  if (step_with_jump(m, d)) return true;
  error = tls_message;
  return false;
}

void reinstall() {
  if (tls_jump != nullptr) _mjPRIVATE_setTlsLogHandler(&handle);
}

}  // namespace mjfast::mujoco_guard
