// EnvCore's binding and lifecycle: bind, plugin generations, the step recorder, the reset and
// geometry notifications, close. The rest of EnvCore is defined beside it, one concept a file
// (env_faults.cc, env_step_loop.cc, env_control_entry.cc, env_physics.cc, env_sim_control.cc,
// env_state.cc); its physics thread is a PhysicsThread (physics_thread.h), which sees it only as a
// SteppingTarget. The lock order is at the top of env_core.h.
#include "env/env_core.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/call_context.h"
#include "common/mujoco_guard.h"

namespace mjfast {

EnvCore::EnvCore(bool render_sync) : render_(std::make_unique<RenderCore>(&host_, render_sync)) {}

EnvCore::~EnvCore() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw; close() refuses only where the env is in use on this thread.
  }
  // The Python objects of the last binding are released here, with no lock of ours held.
}

void EnvCore::bind(const mjModel* model, mjData* data, mjData* control_scratch,
                   std::shared_ptr<void> owner) {
  if (data_) hooks::unregister_pair(data_);
  model_ = model;
  data_ = data;
  host_.bind_model(model, data);
  {
    // A control read()/write() in progress holds this mutex while it uses the old scratch data:
    // once it is ours, nothing reaches the old binding any more.
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.rebind(model, control_scratch, data);
  }
  std::swap(bound_owner_, owner);  // `owner` now holds the old binding: released on return
  std::shared_ptr<void> old_scratch = std::move(scratch_owner_);  // likewise
  identity_ = identity_of(model);
  state_size_.store(mj_stateSize(model, kStateSpec), std::memory_order_release);
  state_scratch_.assign(static_cast<std::size_t>(state_size_.load()), 0.0);
  advance(model_generation_);
  hooks::register_pair(model, data, weak_from_this());
  clear_simulation_fault();  // new data: nothing of the old one's state carries over
}

void EnvCore::set_control_scratch(mjData* control_scratch, std::shared_ptr<void> owner) {
  {
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.set_scratch(control_scratch);
  }
  std::swap(scratch_owner_, owner);  // the one it replaces (if any) is released on return
}

void EnvCore::load_next_plugin_generation() {
  const PluginGeneration next = advance(plugin_generation_);
  const SimulationRequests::CreationScope creating(weak_from_this());  // native host services
  const mujoco_guard::Scope guard;  // a native load's MuJoCo error is its load failure
  host_.load_generation(model_generation(), next);
}

void EnvCore::check_open(const char* what) const {
  if (closed_) throw std::logic_error(std::string(what) + " on a closed env");
}

void EnvCore::check_call(const std::string& what, call_context::Refusal kind) const {
  using call_context::Refusal;
  switch (kind) {
    case Refusal::kSimulationControl:
      if (call_context::in_plugin_callback()) call_context::refuse(kind, what);
      return;
    case Refusal::kOwnCallback:
      if (!closed_ && host_.held_by_this_thread()) call_context::refuse(kind, what);
      return;
    case Refusal::kAcquireBlock:
      if (host_.scope_held_by_this_thread()) call_context::refuse(kind, what);
      return;
    case Refusal::kLifecycle:
      if (const std::string* inside = call_context::LifecycleMark::current(this)) {
        call_context::refuse(kind, what, "env." + *inside + "()");
      }
      return;
    default:
      throw std::invalid_argument("check_call(): '" + what +
                                  "' can be checked against simulation_control, own_callback, "
                                  "acquire_block or lifecycle only");
  }
}

void EnvCore::set_step_recorder(std::shared_ptr<StepRecorder> recorder) {
  check_open("record()");
  hold_steps();
  struct Resume {
    EnvCore& env;
    ~Resume() { env.release_steps(); }
  } resume{*this};
  check_open("record()");  // closed while this waited
  if (recorder) recorder->begin(model_, data_);
  step_recorder_ = std::move(recorder);
}

void EnvCore::reset_plugins() {
  {
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.clear(data_);
  }
  hooks::DispatchScope dispatching(this);
  const mujoco_guard::Scope guard;  // a native on_reset's MuJoCo error fails that plugin
  raise_if(host_.reset(model_generation()));
}

void EnvCore::notify_geometry_changed(int geom_id) {
  hooks::DispatchScope dispatching(this);
  const mujoco_guard::Scope guard;
  raise_if(host_.notify_geometry_changed(model_generation(), geom_id));
}
void EnvCore::close() {
  if (closed_) return;
  if (host_.scope_held_by_this_thread()) {
    call_context::refuse(call_context::Refusal::kAcquireBlock, "close()");
  }
  stop_thread();  // a fault it ended with dies with the env
  // At a step boundary, so that a step(n) running on another thread stops there (it raises
  // LogicError) instead of stepping on without plugins.
  hold_steps();
  host_.quiesce_and_destroy();
  if (data_) hooks::unregister_pair(data_);
  closed_ = true;
  release_steps();
}

}  // namespace mjfast
