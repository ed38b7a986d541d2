// IPluginAdapter: the only face of a plugin that PluginHost sees. The Python plugin adapter and
// the native plugin adapter implement it; the host knows neither Python nor shared libraries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include <mujoco/mujoco.h>

namespace mjfast {

// The per-event callbacks a plugin may override; the value is the index of its dispatch table.
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
inline constexpr std::size_t kCallbackCount = 9;

using CallbackMask = std::uint32_t;
constexpr CallbackMask mask_of(Callback callback) {
  return CallbackMask{1} << static_cast<unsigned>(callback);
}
constexpr std::size_t index_of(Callback callback) { return static_cast<std::size_t>(callback); }

// The name a user knows a callback by (the Python method name).
const char* callback_name(Callback callback);

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

  // The name the plugin's author knows `callback` by (a ControlPlugin's reset is on_reset).
  virtual const char* name_of(Callback callback) const { return callback_name(callback); }
};

}  // namespace mjfast
