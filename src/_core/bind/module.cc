// mjfast._core: the compiled core. Each concept is bound by its own bind_<concept>.cc.
#include <mujoco/mujoco.h>

#include <string>

#include "bind/bindings.h"

#ifndef MJFAST_MUJOCO_VERSION
#error "MJFAST_MUJOCO_VERSION must be defined by the build"
#endif

PYBIND11_MODULE(_core, module) {
  module.doc() =
      "mjfast's compiled core: EnvCore (stepping, the physics thread, the control bridge's "
      "read/write), PluginHost with its Python and native plugin adapters and the callback table "
      "(CALLBACKS), RenderCore with offscreen cameras and frame leases, the MuJoCo callback "
      "trampolines, VectorCore (many worlds on a worker pool), and the translation of core "
      "errors to mjfast.errors.";
  // The soname pins the library version, but a header/library mismatch inside one version would
  // still corrupt memory silently: refuse to load instead.
  if (mj_version() != mjVERSION_HEADER) {
    throw py::import_error("mjfast._core was built against MuJoCo headers " +
                           std::to_string(mjVERSION_HEADER) + " but the loaded libmujoco is " +
                           std::to_string(mj_version()));
  }
  module.attr("MUJOCO_VERSION_BUILT") = MJFAST_MUJOCO_VERSION;
  mjfast::bind_errors(module);
  mjfast::bind_hooks(module);
  mjfast::bind_plugin_host(module);
  mjfast::bind_env(module);
  mjfast::bind_control(module);
  mjfast::bind_controllers(module);
  mjfast::bind_native(module);
  mjfast::bind_render(module);
  mjfast::bind_recorder(module);
  mjfast::bind_handoff(module);
  mjfast::bind_cdr(module);
  mjfast::bind_vector_env(module);
}
