// Exposes the trampolines' addresses (installed from Python through mujoco's own setters) and the
// ownership check.
#include <cstdint>
#include <memory>

#include "bind/bindings.h"
#include "common/hooks.h"

namespace mjfast {
namespace {

struct CallbackFree {
  std::unique_ptr<hooks::DispatchScope> scope;
};

}  // namespace

void bind_hooks(py::module_& module) {
  module.def("control_trampoline_address",
             [] { return reinterpret_cast<std::uintptr_t>(&hooks::control_trampoline); });
  module.def("passive_trampoline_address",
             [] { return reinterpret_cast<std::uintptr_t>(&hooks::passive_trampoline); });
  module.def("hooks_owned", [] { return hooks::control_owned() && hooks::passive_owned(); });
  module.def("control_hook_owned", &hooks::control_owned,
             "Whether MuJoCo's mjcb_control holds mjfast's trampoline.");
  module.def("passive_hook_owned", &hooks::passive_owned,
             "Whether MuJoCo's mjcb_passive holds mjfast's trampoline.");

  module.def("in_plugin_callback", &hooks::in_plugin_callback,
             "True on a thread that is inside a plugin callback (step callbacks, reset/on_reset, "
             "update_read/write, load/init, activate, unload/cleanup).");

  // `with _core.CallbackFree():` makes the trampolines do nothing on this thread, for the
  // mj_forward that the env runs after a reset (plugins get reset(), not a control callback).
  py::class_<CallbackFree>(module, "CallbackFree")
      .def(py::init<>())
      .def("__enter__",
           [](CallbackFree& self) { self.scope = std::make_unique<hooks::DispatchScope>(); })
      .def("__exit__", [](CallbackFree& self, const py::args&) { self.scope.reset(); });
}

}  // namespace mjfast
