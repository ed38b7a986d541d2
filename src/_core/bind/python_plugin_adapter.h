// The adapter that puts a Python MujocoPlugin or ControlPlugin instance behind IPluginAdapter.
// It caches the bound methods of the callbacks the class overrides and their argument tuples, so
// a dispatch costs one GIL acquisition and one call; the raw pointers the host passes are ignored
// in favour of the env's Python model/data objects, which view the same memory.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>

#include "bind/pybind11.hpp"
#include "common/errors.h"
#include "control/native_control.h"
#include "plugin_host/due_window.h"
#include "plugin_host/plugin_adapter.h"

namespace mjfast {

// A Python exception raised by a plugin. Its message is `Type: text`, without the traceback that
// pybind11 appends; the original travels along (its __traceback__ set) and becomes the
// PluginError's __cause__, and the formatted traceback goes into the failure record.
class PythonPluginException : public std::runtime_error, public TracebackCarrier {
 public:
  // `instance`: the plugin that raised (named in the debug log of the traceback).
  PythonPluginException(py::error_already_set error, const py::object& instance);
  const std::string& traceback() const noexcept override { return traceback_; }
  py::error_already_set original;

 private:
  std::string traceback_;
};

// THE lifecycle methods the host calls on a Python plugin besides the per-event callbacks
// (kCallbacks): per step, the MujocoPlugin method and the ControlPlugin method. Exported as
// _core.LIFECYCLE, from which mjfast.plugin knows every method name the host calls.
enum class Lifecycle : std::uint8_t {
  kLoad,
  kUnload,
  kStatistics,
  kActivate,
  kGetState,
  kSetState
};
struct LifecycleInfo {
  Lifecycle step;
  const char* mujoco_method;
  const char* control_method;
};
inline constexpr LifecycleInfo kLifecycle[] = {
    {Lifecycle::kLoad, "load", "init"},
    {Lifecycle::kUnload, "unload", "cleanup"},
    {Lifecycle::kStatistics, "statistics", "statistics"},
    {Lifecycle::kActivate, "activate", "activate"},
    {Lifecycle::kGetState, "get_state", "get_state"},
    {Lifecycle::kSetState, "set_state", "set_state"},
};
constexpr bool lifecycle_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kLifecycle); ++i) {
    if (static_cast<std::size_t>(kLifecycle[i].step) != i) return false;
  }
  return true;
}
static_assert(lifecycle_in_enum_order(), "kLifecycle must list each step once, in enum order");

class PythonPluginAdapter final : public IPluginAdapter {
 public:
  enum class Style { kMujoco, kControl };

  // `control_data` is the MjData passed to update_read/update_write (the control bridge's
  // scratch data); `callbacks` are the names of the overridden callbacks; `stateful`: the class
  // defines get_state/set_state (SPEC §20).
  PythonPluginAdapter(py::object instance, Style style, py::object model, py::object data,
                      py::object control_data, py::object node, const py::iterable& callbacks,
                      bool stateful = false);
  ~PythonPluginAdapter() override;

  bool load(const mjModel* m, mjData* d) override;
  CallbackMask callbacks() override { return callbacks_; }
  std::map<std::string, double> statistics() override;
  bool activate() override;

  void control(const mjModel*, mjData*) override { call(Callback::kControl); }
  void passive(const mjModel*, mjData*) override { call(Callback::kPassive); }
  void render(const mjModel*, mjData*, mjvScene* scene) override;
  // A step outside the plugin's due window (a rate plugin between two due times) costs no GIL.
  void last_stage(const mjModel*, mjData* d) override {
    if (due_window_ != nullptr && due_window_->not_due(d->time)) return;
    call(Callback::kLastStage);
  }
  void geom_changed(const mjModel*, mjData*, int geom_id) override;
  void reset(const mjModel*, mjData*) override { call(Callback::kReset); }
  void pre_step(const mjModel*, mjData*) override { call(Callback::kPreStep); }
  void update_read(const mjModel*, mjData*) override { call(Callback::kUpdateRead); }
  void update_write(const mjModel*, mjData*) override { call(Callback::kUpdateWrite); }
  void unload() override;
  const char* name_of(Callback callback) const override;
  // The compiled control() of the plugin's `__mjfast_native_control__` (a NativeControl: SPEC
  // §23's controllers), if load() set one: the host calls it instead of the Python
  // control_callback, so such a plugin costs no GIL and no Python per step.
  DirectCallback direct(Callback callback) override;

  // The instance's get_state()/set_state(value), the value through mjfast.model.state's encoding.
  bool has_state() const override { return stateful_; }
  std::string get_state() override;
  void set_state(const std::string& value) override;

  const py::object& instance() const { return instance_; }

 private:
  void call(Callback callback);
  // This plugin's method for lifecycle step `step` (its base class's name for it).
  const char* method_for(Lifecycle step) const;

  py::object instance_;
  Style style_;
  py::object model_;
  py::object data_;
  py::object node_;
  CallbackMask callbacks_ = 0;
  bool stateful_ = false;
  std::array<py::object, kCallbackCount> methods_;
  std::array<py::object, kCallbackCount> arguments_;
  py::object native_control_;  // keeps native_ alive while the host may call it
  NativeControl* native_ = nullptr;
  py::object due_window_object_;  // keeps due_window_ alive while the host may read it
  const DueWindow* due_window_ = nullptr;
};

}  // namespace mjfast
