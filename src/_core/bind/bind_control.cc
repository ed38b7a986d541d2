// Exposes the control side of EnvCore (SPEC §7): read() returning a ControlState of owned arrays,
// write() validating and staging commands; EnvCore decides what locks and what runs. Validation
// and array building happen with the GIL held; it is released only where EnvCore may block.
#include <pybind11/numpy.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "bind/bindings.h"
#include "env/env_core.h"

namespace mjfast {
namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

struct ControlState {
  double time = 0.0;
  std::array<Array, kStateFieldCount> fields;  // as kStateFields
};

Array owned_copy(const mjtNum* source, mjtSize size) {
  Array array(size);
  std::copy_n(source, size, array.mutable_data());
  return array;
}

// Where EnvCore may wait for another thread that may need the GIL (a control caller inside a
// Python update_read/update_write plugin, a pause waiting for a step's Python plugin), or runs
// those plugins (which take the host mutex, then the GIL): without it.
void wait_without_gil(const std::function<void()>& work) { without_gil(work); }

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
  const std::string expected =
      std::string(field) +
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
                                  " at flat index " + std::to_string(i) + "; nothing was staged");
    }
  }
  return array;
}

std::vector<py::ssize_t> shape_of(const DataField& field, const mjModel* m) {
  if (field.columns == 0) return {field.size(m)};
  return {m->*field.rows, field.columns};
}

ControlState control_read(EnvCore& env) {
  ControlState state;
  env.control_read(wait_without_gil, [&](const mjModel* m, const ControlStateView& view) {
    state.time = view.time;
    for (std::size_t i = 0; i < kStateFieldCount; ++i) {
      state.fields[i] = owned_copy(view.fields[i], kStateFields[i].size(m));
    }
  });
  return state;
}

void control_write(EnvCore& env, const py::object& ctrl, const py::object& qfrc_applied,
                   const py::object& xfrc_applied) {
  static_assert(kCommandFieldCount == 3, "control_write takes one argument per command field");
  const std::array<const py::object*, kCommandFieldCount> given{&ctrl, &qfrc_applied,
                                                                &xfrc_applied};
  // Held until the commands are staged; they are only read, also by plugins without the GIL.
  std::array<std::optional<Array>, kCommandFieldCount> arrays;
  env.control_write(wait_without_gil, [&](const mjModel* m) {
    Commands commands{};
    for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
      arrays[i] = validated(*given[i], kCommandFields[i].name, shape_of(kCommandFields[i], m));
      if (arrays[i]) commands[i] = arrays[i]->data();
    }
    return commands;
  });
}

}  // namespace

void bind_control(py::module_& module) {
  // The control tables' names for Python: ControlState's fields (time first) and write()'s.
  py::list state_fields;
  state_fields.append("time");
  for (const DataField& field : kStateFields) state_fields.append(field.name);
  module.attr("CONTROL_STATE_FIELDS") = py::tuple(state_fields);
  py::list command_fields;
  for (const DataField& field : kCommandFields) command_fields.append(field.name);
  module.attr("CONTROL_COMMAND_FIELDS") = py::tuple(command_fields);

  py::class_<ControlState> state(module, "ControlState",
                                 "One completed physics step's control state; the arrays are the "
                                 "caller's own copies.");
  state.def_readonly("time", &ControlState::time).def("__repr__", [](const ControlState& s) {
    return "<ControlState time=" + std::to_string(s.time) + ">";
  });
  for (std::size_t i = 0; i < kStateFieldCount; ++i) {
    state.def_property_readonly(kStateFields[i].name,
                                [i](const ControlState& s) -> const Array& { return s.fields[i]; });
  }

  py::class_<EnvCore, std::shared_ptr<EnvCore>> env(module.attr("EnvCore"));
  env.def("control_read", &control_read,
          "The newest control state, passed through update_read plugins (SPEC §7).")
      .def("control_write", &control_write, py::arg(kCommandFields[0].name) = py::none(),
           py::arg(kCommandFields[1].name) = py::none(),
           py::arg(kCommandFields[2].name) = py::none(),
           "Validate and stage commands, passed through update_write plugins (SPEC §7).");
}

}  // namespace mjfast
