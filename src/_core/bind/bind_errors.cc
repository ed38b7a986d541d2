// Translates the core's C++ exceptions to the mjfast.errors classes at the Python boundary.
#include <stdexcept>

#include "bind/bindings.h"
#include "bind/python_plugin_adapter.h"
#include "common/errors.h"

namespace mjfast {
namespace {

struct ErrorTypes {
  py::object plugin_error;
  py::object stale_generation;
  py::object hook_ownership;
  py::object camera_unavailable;
  py::object logic_error;
  py::object simulation_error;
};

// Leaked on purpose: translators may run during interpreter shutdown, after module teardown.
ErrorTypes* error_types = nullptr;

void raise_plugin_error(const PluginDispatchError& error) {
  py::object cause;
  try {
    std::rethrow_exception(error.cause);
  } catch (PythonPluginException& original) {
    cause = original.original.value();
  } catch (py::error_already_set& original) {
    cause = original.value();
  } catch (const std::logic_error& original) {  // a native plugin's MJFAST_LOGIC_ERROR
    cause = error_types->logic_error(original.what());
  } catch (const std::exception& original) {
    cause = py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(original.what());
  } catch (...) {
    cause = py::reinterpret_borrow<py::object>(PyExc_RuntimeError)("unknown C++ exception");
  }
  py::object raised =
      error_types->plugin_error(error.what(), error.plugin_name, error.plugin_type, error.callback);
  PyException_SetCause(raised.ptr(), cause.release().ptr());  // steals the reference
  PyErr_SetObject(error_types->plugin_error.ptr(), raised.ptr());
}

// Raises again what interrupted a call (KeyboardInterrupt, SystemExit), as it was raised.
void raise_interrupt(const Interrupted& interrupted) {
  try {
    std::rethrow_exception(interrupted.cause);
  } catch (py::error_already_set& original) {
    original.restore();
  } catch (...) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
  }
}

}  // namespace

void bind_errors(py::module_& /*module*/) {  // registers translators, defines no names
  py::module_ errors = py::module_::import("mjfast.errors");
  error_types =
      new ErrorTypes{errors.attr("PluginError"),        errors.attr("StaleGenerationError"),
                     errors.attr("HookOwnershipError"), errors.attr("CameraUnavailableError"),
                     errors.attr("LogicError"),         errors.attr("SimulationError")};
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Interrupted& e) {
      raise_interrupt(e);
    } catch (const PluginDispatchError& e) {
      raise_plugin_error(e);
    } catch (const SimulationError& e) {
      PyErr_SetString(error_types->simulation_error.ptr(), e.what());
    } catch (const StaleGenerationError& e) {
      PyErr_SetString(error_types->stale_generation.ptr(), e.what());
    } catch (const HookOwnershipError& e) {
      PyErr_SetString(error_types->hook_ownership.ptr(), e.what());
    } catch (const CameraUnavailableError& e) {
      PyErr_SetString(error_types->camera_unavailable.ptr(), e.what());
    } catch (const std::invalid_argument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::out_of_range& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const std::length_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::domain_error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const std::logic_error& e) {
      PyErr_SetString(error_types->logic_error.ptr(), e.what());
    }
  });
}

}  // namespace mjfast
