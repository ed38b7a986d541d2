// Exposes the control side of EnvCore (SPEC §7): read() returning a ControlState of owned arrays,
// write() validating and staging commands. Validation and array building happen with the GIL held;
// the GIL is released only to wait for the control mutex or to run update_read/update_write
// plugins (which take the host mutex, then the GIL).
#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <pybind11/numpy.h>

#include "bindings.h"
#include "env_core.h"
#include "hooks.h"

namespace mjfast {
namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

struct ControlState {
  double time = 0.0;
  Array qpos, qvel, act, qfrc_actuator, sensordata, ctrl;
};

Array owned_copy(const mjtNum* source, int size) {
  Array array(size);
  std::copy_n(source, size, array.mutable_data());
  return array;
}

// Locks the control mutex; if another control caller holds it (maybe waiting for the GIL inside a
// Python update_read/update_write plugin), waits without the GIL.
std::unique_lock<std::mutex> lock_control(ControlBridge& bridge) {
  std::unique_lock<std::mutex> lock(bridge.control_mutex(), std::try_to_lock);
  if (!lock.owns_lock()) {
    without_gil([&] { lock.lock(); });  // the holder may need the GIL to finish
  }
  return lock;
}

// With update_read/update_write plugins a control call dispatches, taking the host mutex after
// the control mutex; from inside a plugin callback (which holds the host) or an acquire_plugin
// block that order would invert, so it is refused there before any lock is taken.
void check_not_inside_dispatch(EnvCore& env, Callback callback, const char* what) {
  if (!env.host().has_callback(callback)) return;
  if (hooks::in_dispatch_of(&env) || env.host().scope_held_by_this_thread()) {
    throw std::logic_error(std::string(what) +
                           " with control plugins loaded, from inside a plugin callback or an "
                           "acquire_plugin() block, would deadlock");
  }
}

void arm(EnvCore& env) {
  if (env.control().armed()) return;
  // Arming pauses stepping, which may wait for a Python plugin.
  without_gil([&] { env.arm_control(); });
}

std::string shape_text(const std::vector<py::ssize_t>& shape) {
  std::ostringstream text;
  text << "(";
  for (std::size_t i = 0; i < shape.size(); ++i) text << (i ? ", " : "") << shape[i];
  text << (shape.size() == 1 ? ",)" : ")");
  return text.str();
}

// The command as a contiguous float64 array of exactly `shape`, all finite; else ValueError
// naming the field and what was expected. Only integer and floating dtypes are converted: a
// forced cast would silently drop a complex value's imaginary part, read strings as numbers, and
// turn bools and datetimes into numbers nobody meant.
std::optional<Array> validated(const py::object& value, const char* field,
                               const std::vector<py::ssize_t>& shape) {
  if (value.is_none()) return std::nullopt;
  const std::string expected = std::string(field) +
                               ": expected an array of real numbers (an int or float dtype; bool, "
                               "complex, object, string and datetime dtypes are refused) of shape " +
                               shape_text(shape) + ", got ";
  py::array given;
  try {
    given = py::array::ensure(value);  // its own dtype: nothing is converted yet
  } catch (py::error_already_set&) {
  }
  if (!given) {
    throw std::invalid_argument(expected +
                                py::str(py::type::of(value).attr("__name__")).cast<std::string>());
  }
  const char kind = given.dtype().kind();
  if (kind != 'i' && kind != 'u' && kind != 'f') {
    throw std::invalid_argument(expected + "dtype " + py::str(given.dtype()).cast<std::string>() +
                                "; nothing was staged");
  }
  Array array;
  try {
    array = Array::ensure(given);
  } catch (py::error_already_set&) {
  }
  if (!array) {  // a cast that raised (a warning turned into an error, say)
    throw std::invalid_argument(expected + "dtype " + py::str(given.dtype()).cast<std::string>() +
                                " that does not convert to float64; nothing was staged");
  }
  std::vector<py::ssize_t> got(array.shape(), array.shape() + array.ndim());
  if (got != shape) {
    throw std::invalid_argument(std::string(field) + ": expected shape " + shape_text(shape) +
                                ", got " + shape_text(got));
  }
  const double* values = array.data();
  for (py::ssize_t i = 0; i < array.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw std::invalid_argument(std::string(field) + ": expected finite values of shape " +
                                  shape_text(shape) + ", got " + std::to_string(values[i]) +
                                  " at flat index " + std::to_string(i) +
                                  "; nothing was staged");
    }
  }
  return array;
}

ControlState control_read(EnvCore& env) {
  env.check_open("control.read()");
  check_not_inside_dispatch(env, Callback::kUpdateRead, "control.read()");
  arm(env);
  ControlBridge& bridge = env.control();
  auto lock = lock_control(bridge);
  const mjModel* m = bridge.model();
  PluginHost* plugins = env.host().has_callback(Callback::kUpdateRead) ? &env.host() : nullptr;
  ControlStateView view;
  if (plugins) {
    // update_read plugins take the host mutex, then the GIL. A plugin calling reset/step/read of
    // this env from there is refused.
    view = without_gil([&] {
      hooks::DispatchScope dispatching(&env);
      return bridge.read_locked(plugins, env.model_generation());
    });
  } else {
    view = bridge.read_locked(nullptr, env.model_generation());
  }
  ControlState state;
  state.time = view.time;
  state.qpos = owned_copy(view.qpos, m->nq);
  state.qvel = owned_copy(view.qvel, m->nv);
  state.act = owned_copy(view.act, m->na);
  state.qfrc_actuator = owned_copy(view.qfrc_actuator, m->nv);
  state.sensordata = owned_copy(view.sensordata, m->nsensordata);
  state.ctrl = owned_copy(view.ctrl, m->nu);
  return state;
}

void control_write(EnvCore& env, const py::object& ctrl, const py::object& qfrc_applied,
                   const py::object& xfrc_applied) {
  env.check_open("control.write()");
  check_not_inside_dispatch(env, Callback::kUpdateWrite, "control.write()");
  arm(env);
  ControlBridge& bridge = env.control();
  auto lock = lock_control(bridge);
  const mjModel* m = bridge.model();
  // All three are validated before anything is staged.
  const auto ctrl_array = validated(ctrl, "ctrl", {m->nu});
  const auto qfrc_array = validated(qfrc_applied, "qfrc_applied", {m->nv});
  const auto xfrc_array = validated(xfrc_applied, "xfrc_applied", {m->nbody, 6});
  const mjtNum* ctrl_values = ctrl_array ? ctrl_array->data() : nullptr;
  const mjtNum* qfrc_values = qfrc_array ? qfrc_array->data() : nullptr;
  const mjtNum* xfrc_values = xfrc_array ? xfrc_array->data() : nullptr;
  PluginHost* plugins = env.host().has_callback(Callback::kUpdateWrite) ? &env.host() : nullptr;
  if (plugins) {
    // The arrays stay alive (held above) and are only read; update_write plugins take the host
    // mutex, then the GIL.
    without_gil([&] {
      hooks::DispatchScope dispatching(&env);
      bridge.write_locked(ctrl_values, qfrc_values, xfrc_values, plugins, env.model_generation());
    });
  } else {
    bridge.write_locked(ctrl_values, qfrc_values, xfrc_values, nullptr, env.model_generation());
  }
}

}  // namespace

void bind_control(py::module_& module) {
  py::class_<ControlState>(module, "ControlState",
                           "One completed physics step's control state; the arrays are the "
                           "caller's own copies.")
      .def_readonly("time", &ControlState::time)
      .def_readonly("qpos", &ControlState::qpos)
      .def_readonly("qvel", &ControlState::qvel)
      .def_readonly("act", &ControlState::act)
      .def_readonly("qfrc_actuator", &ControlState::qfrc_actuator)
      .def_readonly("sensordata", &ControlState::sensordata)
      .def_readonly("ctrl", &ControlState::ctrl)
      .def("__repr__", [](const ControlState& s) {
        return "<ControlState time=" + std::to_string(s.time) + ">";
      });

  py::class_<EnvCore, std::shared_ptr<EnvCore>> env(module.attr("EnvCore"));
  env.def("control_read", &control_read,
          "The newest control state, passed through update_read plugins (SPEC §7).")
      .def("control_write", &control_write, py::arg("ctrl") = py::none(),
           py::arg("qfrc_applied") = py::none(), py::arg("xfrc_applied") = py::none(),
           "Validate and stage commands, passed through update_write plugins (SPEC §7).");
}

}  // namespace mjfast
