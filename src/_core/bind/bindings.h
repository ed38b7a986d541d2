// The bind_<concept>.cc entry points that module.cc calls, in that order.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "bind/pybind11.hpp"
#include "plugin_host/plugin_host.h"

namespace mjfast {

void bind_errors(py::module_& module);
void bind_hooks(py::module_& module);
void bind_plugin_host(py::module_& module);
void bind_env(py::module_& module);
void bind_control(py::module_& module);
void bind_controllers(py::module_& module);
void bind_native(py::module_& module);
void bind_render(py::module_& module);
void bind_recorder(py::module_& module);
void bind_handoff(py::module_& module);
void bind_cdr(py::module_& module);
void bind_vector_env(py::module_& module);

class SceneProvider;
// The scene provider of every env made from Python (bind_render.cc): each snapshot scene is a
// mujoco.MjvScene, so render_callback receives the very scene that is rendered.
std::unique_ptr<SceneProvider> python_scene_provider();

// total / count as a figure for Python, 0 when nothing was counted (a mean of no samples).
inline double mean_or_zero(std::uint64_t total, std::uint64_t count) {
  return count ? static_cast<double>(total) / static_cast<double>(count) : 0.0;
}

// step(n)'s n, for EnvCore.step and VectorEnv.step (bind_env.cc): what operator.index() takes, in
// 0..2**63-1; else a TypeError naming the type or a ValueError naming the value and the limit.
std::int64_t step_count_of(const py::handle& n);

// Moves the adapters out of a Python list of AdapterEntry objects (FactoryEntry in C++), for the
// factory (bind_plugin_host.cc).
std::vector<FactoryEntry> take_factory_entries(const py::handle& entries);

// What acquire_plugin yields for a native adapter (bind_native.cc); None for any other adapter.
py::object native_backend(const py::object& host_object, const PluginHost& host,
                          IPluginAdapter* adapter);

}  // namespace mjfast
