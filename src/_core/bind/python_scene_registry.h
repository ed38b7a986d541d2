// The mujoco.MjvScene Python objects whose mjvScene RenderCore builds snapshots in, by address,
// so that a Python plugin's render_callback receives the very scene that is rendered. Defined in
// bind_render.cc; call with the GIL held.
#pragma once

#include <mujoco/mujoco.h>

#include "bind/pybind11.hpp"

namespace mjfast {

// The Python scene object of `scene`, or None when the scene was made natively.
py::object python_scene_for(const mjvScene* scene);

// Registers a mujoco.MjvScene object under the address of its mjvScene and returns that address;
// unregister it when the scene is no longer passed to plugins.
mjvScene* register_python_scene(py::object scene);
void unregister_python_scene(const mjvScene* scene);

}  // namespace mjfast
