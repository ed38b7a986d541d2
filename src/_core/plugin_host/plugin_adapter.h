// IPluginAdapter: the only face of a plugin that PluginHost sees. The Python plugin adapter and
// the native plugin adapter implement it; the host knows neither Python nor shared libraries.
#pragma once

#include <mujoco/mujoco.h>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>

struct mjfast_error;  // the native plugin ABI's error buffer (mjfast/plugin_abi.h), passed on

namespace mjfast {

// The per-event callbacks a plugin may override; the value is the index of its dispatch table
// and its row in kCallbacks.
enum class Callback : std::uint8_t {
  kControl,
  kPassive,
  kRender,
  kLastStage,
  kGeomChanged,
  kReset,
  kPreStep,
  kUpdateRead,
  kUpdateWrite,
};

// The one table of callback names: the Python method that receives each callback on a
// MujocoPlugin and on a ControlPlugin (nullptr where that base has none). callback_name, the
// Python adapter's method lookup and, through `_core.CALLBACKS`, plugin.py's overridden_callbacks
// all read it.
struct CallbackInfo {
  Callback callback;
  const char* mujoco_method;
  const char* control_method;
};

inline constexpr CallbackInfo kCallbacks[] = {
    {Callback::kControl, "control_callback", nullptr},
    {Callback::kPassive, "passive_callback", nullptr},
    {Callback::kRender, "render_callback", nullptr},
    {Callback::kLastStage, "last_stage_callback", nullptr},
    {Callback::kGeomChanged, "on_geom_changed", nullptr},
    {Callback::kReset, "reset", "on_reset"},
    {Callback::kPreStep, nullptr, "pre_step"},
    {Callback::kUpdateRead, nullptr, "update_read"},
    {Callback::kUpdateWrite, nullptr, "update_write"},
};
inline constexpr std::size_t kCallbackCount = std::size(kCallbacks);

constexpr std::size_t index_of(Callback callback) { return static_cast<std::size_t>(callback); }

// Lookups index kCallbacks by the enum's value: each row must sit at its callback's index.
constexpr bool callbacks_in_enum_order() {
  for (std::size_t i = 0; i < kCallbackCount; ++i) {
    if (index_of(kCallbacks[i].callback) != i) return false;
  }
  return true;
}
static_assert(callbacks_in_enum_order(), "kCallbacks must list each Callback once, in enum order");

using CallbackMask = std::uint32_t;
static_assert(kCallbackCount <= 32, "a CallbackMask has one bit per callback");
constexpr CallbackMask mask_of(Callback callback) {
  return CallbackMask{1} << static_cast<unsigned>(callback);
}

// The name a user knows a callback by: its MujocoPlugin method, or its ControlPlugin method for
// a callback only a ControlPlugin has.
constexpr const char* callback_name(Callback callback) {
  if (index_of(callback) >= kCallbackCount) return "unknown";
  const CallbackInfo& info = kCallbacks[index_of(callback)];
  return info.mujoco_method != nullptr ? info.mujoco_method : info.control_method;
}

// A callback of (model, data) as a plain C function, which the host may call instead of the
// adapter's virtual: what a native plugin's table holds. One indirect call per plugin call
// instead of a virtual call and then the plugin's. A non-zero status goes to direct_failed().
struct DirectCallback {
  int (*function)(void* instance, const mjModel* m, mjData* d, mjfast_error* error) = nullptr;
  void* instance = nullptr;
  mjfast_error* error = nullptr;
};

// The callbacks that take just (model, data) and so may have a DirectCallback.
constexpr bool takes_model_and_data(Callback callback) {
  return callback != Callback::kRender && callback != Callback::kGeomChanged;
}

class IPluginAdapter {
 public:
  virtual ~IPluginAdapter() = default;

  // Load phase. False or an exception is a load failure.
  virtual bool load(const mjModel* model, mjData* data) = 0;
  // Statistics phase: which callbacks to dispatch, and the plugin's own figures.
  virtual CallbackMask callbacks() = 0;
  virtual std::map<std::string, double> statistics() { return {}; }
  // Activate phase, once every plugin of the generation has loaded.
  virtual bool activate() { return true; }

  virtual void control(const mjModel*, mjData*) {}
  virtual void passive(const mjModel*, mjData*) {}
  virtual void render(const mjModel*, mjData*, mjvScene*) {}
  virtual void last_stage(const mjModel*, mjData*) {}
  virtual void geom_changed(const mjModel*, mjData*, int /*geom_id*/) {}
  virtual void reset(const mjModel*, mjData*) {}
  virtual void pre_step(const mjModel*, mjData*) {}
  virtual void update_read(const mjModel*, mjData*) {}
  virtual void update_write(const mjModel*, mjData*) {}

  // Before the adapter is destroyed (shutdown or reload); never throws out of the host.
  virtual void unload() {}

  // `callback` as a plain C function (takes_model_and_data callbacks only), or none: the host then
  // calls the virtual. Asked when the dispatch tables are built; valid until unload().
  virtual DirectCallback direct(Callback) { return {}; }
  // A DirectCallback returned `status` != 0: throws the plugin's error for that status, or
  // returns where the status is not a failure.
  virtual void direct_failed(int /*status*/) {}

  // The name the plugin's author knows `callback` by (a ControlPlugin's reset is on_reset).
  virtual const char* name_of(Callback callback) const { return callback_name(callback); }

  // Optional state (SPEC §20): whether the plugin defines get_state/set_state. get_state() returns
  // its state as a value in mjfast's state value encoding (python/mjfast/model/state.py; a native
  // plugin's own bytes as an encoded bytes value), set_state() restores one; a set_state that
  // throws must leave the plugin as it was. The host calls them with both of its mutexes held
  // and stepping paused, and throws what they throw.
  virtual bool has_state() const { return false; }
  virtual std::string get_state() { return {}; }
  virtual void set_state(const std::string& /*value*/) {}
};

}  // namespace mjfast
