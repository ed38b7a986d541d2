#include "common/mujoco_guard.h"

#include <csetjmp>
#include <cstring>

#include "common/hooks.h"

// MuJoCo's thread-local log handler, as its own Python bindings use it (not in the public header).
extern "C" {
MJAPI mjfLogHandler _mjPRIVATE_setTlsLogHandler(mjfLogHandler handler);
}

namespace mjfast::mujoco_guard {
namespace {

// This thread's guard state: whether a Scope is active, the handler it replaced, and the guarded
// mj_step in progress (where to jump, and the dispatch depth it was entered at). Read around every
// step, so MJFAST_FAST_TLS (hooks.h); the message buffer is large and read only on an error.
thread_local bool tls_active MJFAST_FAST_TLS = false;
thread_local mjfLogHandler tls_previous MJFAST_FAST_TLS = nullptr;
thread_local std::jmp_buf* tls_jump MJFAST_FAST_TLS = nullptr;
thread_local int tls_jump_dispatch_depth MJFAST_FAST_TLS = 0;
thread_local char tls_message[sizeof(mjLogMessage::subject)];
thread_local std::uint64_t tls_errors = 0;  // MuJoCo errors caught on this thread, ever

void handle(const mjLogMessage* message) {
  if (message->level < mjLOG_ERROR) {
    // Warnings and info are handed to the handler the outermost Scope replaced. (MuJoCo 4.0's
    // mju_message drops a message dispatched from inside a log handler, so they reach nobody;
    // tests/cpp/mujoco_guard_test.cc does not assert where they go.)
    const mjfLogHandler mine = _mjPRIVATE_setTlsLogHandler(tls_previous);
    mju_message(message);
    _mjPRIVATE_setTlsLogHandler(mine);
    return;
  }
  ++tls_errors;
  std::strncpy(tls_message, message->subject, sizeof(tls_message) - 1);
  tls_message[sizeof(tls_message) - 1] = '\0';
  if (tls_jump == nullptr || hooks::dispatch_depth() != tls_jump_dispatch_depth) {
    // Not mj_step's own code: a plugin's (or the render turn's) frames, maybe holding locks, are
    // between here and the guard, so unwind through them instead of jumping over them.
    throw MujocoCallError(std::string("MuJoCo error: ") + tls_message);
  }
  std::longjmp(*tls_jump, 1);
}

// No automatic object with a destructor lives in this frame (setjmp's rule), and it is never
// inlined into a caller that has them. Everything read after the jump is set before setjmp and
// not changed after it. A guarded step may nest (a plugin stepping another env): the outer one's
// jump target comes back.
__attribute__((noinline)) bool step_with_jump(const mjModel* m, mjData* d) {
  std::jmp_buf jump;
  std::jmp_buf* const outer_jump = tls_jump;
  const int outer_depth = tls_jump_dispatch_depth;
  tls_jump = &jump;
  tls_jump_dispatch_depth = hooks::dispatch_depth();
  if (setjmp(jump) == 0) {
    mj_step(m, d);
    tls_jump = outer_jump;
    tls_jump_dispatch_depth = outer_depth;
    return true;
  }
  tls_jump = outer_jump;  // reached by the handler's longjmp
  tls_jump_dispatch_depth = outer_depth;
  return false;
}

}  // namespace

Scope::Scope()
    : previous_handler_(_mjPRIVATE_setTlsLogHandler(&handle)),
      outer_previous_(tls_previous),
      outer_active_(tls_active),
      errors_at_start_(tls_errors) {
  if (!outer_active_) tls_previous = previous_handler_;  // nested: keep the outermost one's
  tls_active = true;
}

Scope::~Scope() {
  tls_active = outer_active_;
  tls_previous = outer_previous_;
  _mjPRIVATE_setTlsLogHandler(previous_handler_);
}

bool Scope::caught_error() const { return tls_errors != errors_at_start_; }

bool step(const mjModel* m, mjData* d, std::string& error) {
  if (step_with_jump(m, d)) return true;
  error = tls_message;
  return false;
}

void reinstall() {
  if (tls_active) _mjPRIVATE_setTlsLogHandler(&handle);
}

}  // namespace mjfast::mujoco_guard
