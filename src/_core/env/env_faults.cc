// EnvCore's fault records: a plugin error waiting for the end of its step, a fault that ends
// stepping (MuJoCo error, lost hooks, an interrupt on the physics thread) and the undefined-data
// flag a MuJoCo error leaves; each raised once, by whoever steps next. Also the one guarded,
// callback-free mj_forward of a reset and a set_state, whose MuJoCo error sets that flag.
#include <string>
#include <utility>

#include "common/errors.h"
#include "common/hooks.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {

void EnvCore::record_error(DispatchError error) {
  if (!error) return;
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (!pending_error_) pending_error_ = std::move(error);  // the first error is the one raised
  pending_flag_.store(true, std::memory_order_release);
}

void EnvCore::rethrow_pending_error() {
  DispatchError error;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    error = std::exchange(pending_error_, nullptr);
    pending_flag_.store(false, std::memory_order_release);
  }
  if (error) std::rethrow_exception(error);
}

void EnvCore::raise_if(const DispatchError& error) {
  if (error) std::rethrow_exception(error);
}
void EnvCore::record_fault(std::exception_ptr fault) {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (!fault_) fault_ = std::move(fault);
  fault_pending_.store(true, std::memory_order_release);
}

void EnvCore::raise_fault_if_any(bool refuse_undefined_state) {
  std::exception_ptr fault;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    fault = std::exchange(fault_, nullptr);
    fault_pending_.store(false, std::memory_order_release);
    if (!fault && refuse_undefined_state && simulation_invalid_.load(std::memory_order_acquire)) {
      fault = std::make_exception_ptr(
          SimulationError("the simulation state is undefined after a MuJoCo error (" +
                          simulation_error_ + "): call env.reset() or env.reload() first"));
    }
  }
  if (fault) std::rethrow_exception(fault);
}

void EnvCore::forward_callback_free(const char* caller) {
  const hooks::DispatchScope callback_free;
  const mujoco_guard::Scope guard;
  try {
    mj_forward(model_, data_);
  } catch (const mujoco_guard::MujocoCallError& error) {
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      simulation_error_ = error.what();
    }
    simulation_invalid_.store(true, std::memory_order_release);
    throw SimulationError(std::string(caller) + ": MuJoCo error in mj_forward: " + error.what() +
                          " (the simulation state is undefined until env.reset())");
  }
}

void EnvCore::clear_simulation_fault() {
  std::lock_guard<std::mutex> lock(pending_mutex_);
  simulation_invalid_.store(false, std::memory_order_release);
  simulation_error_.clear();
}

}  // namespace mjfast
