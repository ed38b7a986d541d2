// EnvCore's state (SPEC §20): the model's identity, get_state and set_state at a step boundary.
#include <stdexcept>
#include <string>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "env/env_core.h"

namespace mjfast {

std::shared_ptr<const EnvCore::ModelIdentity> EnvCore::identity_of(const mjModel* m) {
  // FNV-1a, 128 bits, over the sizes of every part of a physics state, the counts of the objects
  // that names and plugins refer to, the joint types and the names buffer: what makes a state
  // mean the same thing in two models. Parameter values (masses, gains, friction) stay out.
  using u128 = unsigned __int128;
  const u128 prime = (u128{0x0000000001000000ull} << 64) | 0x000000000000013Bull;
  u128 hash = (u128{0x6c62272e07bb0142ull} << 64) | 0x62b821756295c58dull;
  const auto feed = [&](const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash ^= bytes[i];
      hash *= prime;
    }
  };
  const auto feed_size = [&](std::int64_t value) { feed(&value, sizeof(value)); };
  feed_size(1);  // the signature's own version
  for (int bit = 0; bit < mjNSTATE; ++bit) feed_size(mj_stateSize(m, 1 << bit));
  for (const std::int64_t count :
       {std::int64_t{m->nq},      std::int64_t{m->nv},           std::int64_t{m->nu},
        std::int64_t{m->na},      std::int64_t{m->nbody},        std::int64_t{m->njnt},
        std::int64_t{m->ngeom},   std::int64_t{m->nsite},        std::int64_t{m->ncam},
        std::int64_t{m->nlight},  std::int64_t{m->nmesh},        std::int64_t{m->neq},
        std::int64_t{m->ntendon}, std::int64_t{m->nsensor},      std::int64_t{m->nsensordata},
        std::int64_t{m->nmocap},  std::int64_t{m->nkey},         std::int64_t{m->nuserdata},
        std::int64_t{m->nplugin}, std::int64_t{m->npluginstate}, std::int64_t{m->nflex}}) {
    feed_size(count);
  }
  feed(m->jnt_type, sizeof(int) * static_cast<std::size_t>(m->njnt));
  feed_size(m->nnames);
  feed(m->names, static_cast<std::size_t>(m->nnames));
  static constexpr char kHex[] = "0123456789abcdef";
  auto identity = std::make_shared<ModelIdentity>();
  for (int shift = 124; shift >= 0; shift -= 4) {
    identity->signature += kHex[static_cast<unsigned>(hash >> shift) & 0xf];
  }
  const std::string name = m->nnames > 0 ? std::string(m->names) : std::string();
  identity->description = "model '" + name + "' (nq=" + std::to_string(m->nq) +
                          ", nv=" + std::to_string(m->nv) + ", nu=" + std::to_string(m->nu) +
                          ", na=" + std::to_string(m->na) + ", nbody=" + std::to_string(m->nbody) +
                          ")";
  return identity;
}

void EnvCore::refuse_state_call(const char* what) const {
  // A plugin's callback (its load/init and reset included) has the model and data at hand, and
  // the step it runs in holds what a state call waits for.
  if (call_context::in_plugin_callback()) {
    call_context::refuse(call_context::Refusal::kStateCall, what);
  }
  check_open(what);
}

namespace {

// Releases what hold_steps() held, on every way out.
struct Resume {
  EnvCore& env;
  ~Resume() { env.release_steps(); }
};

}  // namespace

bool EnvCore::get_state(double* physics, std::size_t size, StateHeader& header,
                        std::vector<PluginStateEntry>* plugins) {
  refuse_state_call("get_state()");
  hold_steps();  // a step boundary; refused inside an acquire_plugin block
  const Resume resume{*this};
  check_open("get_state()");  // closed while this waited
  if (size != static_cast<std::size_t>(state_size_.load(std::memory_order_relaxed))) return false;
  mj_getState(model_, data_, physics, kStateSpec);
  header.step_count = step_count();
  header.model = identity_;
  if (plugins != nullptr) {
    plugins->clear();
    if (host_.has_stateful_plugins()) {
      const hooks::DispatchScope dispatching(this);  // what a plugin calls back into is refused
      const mujoco_guard::Scope guard;               // a native plugin's MuJoCo error is its error
      *plugins = host_.get_states();
    }
  }
  return true;
}

void EnvCore::set_state(const double* physics, std::size_t size, std::uint64_t step_count,
                        const std::string& signature, const std::string& description,
                        const std::vector<PluginStateEntry>& plugins) {
  refuse_state_call("set_state()");
  hold_steps();
  const Resume resume{*this};
  check_open("set_state()");
  if (signature != identity_->signature) {
    throw std::invalid_argument("set_state(): the state is of " + description + ", signature " +
                                signature + ", but this env runs " + identity_->description +
                                ", signature " + identity_->signature +
                                " (a state moves only between models with the same sizes and "
                                "names)");
  }
  const auto expected = static_cast<std::size_t>(state_size_.load(std::memory_order_relaxed));
  if (size != expected) {
    throw std::invalid_argument("set_state(): the state's physics has " + std::to_string(size) +
                                " values, but a state of " + identity_->description + " has " +
                                std::to_string(expected));
  }
  const bool with_plugins = !plugins.empty() || host_.has_stateful_plugins();
  const std::uint64_t previous_count = this->step_count();
  if (with_plugins) mj_getState(model_, data_, state_scratch_.data(), kStateSpec);
  mj_setState(model_, data_, physics, kStateSpec);
  step_count_.store(step_count, std::memory_order_release);
  if (with_plugins) {
    try {
      const hooks::DispatchScope dispatching(this);
      const mujoco_guard::Scope guard;
      host_.set_states(plugins);
    } catch (...) {
      // The plugins put themselves back; the physics and the count go back here.
      mj_setState(model_, data_, state_scratch_.data(), kStateSpec);
      step_count_.store(previous_count, std::memory_order_release);
      throw;
    }
  }
  clear_simulation_fault();  // a MuJoCo error's undefined data is replaced whole
  {
    // Commands staged before are not part of the state: dropped as at a reset.
    std::lock_guard<std::mutex> control_lock(control_mutex_);
    control_.clear(data_);
  }
  // The derived quantities for the new state; plugins learn of it through set_state, not
  // through a control callback (as _core.CallbackFree does for a reset's mj_forward).
  forward_callback_free("set_state()");
}

}  // namespace mjfast
