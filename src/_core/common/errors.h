// The C++ exceptions of the core. They know nothing of Python; bind_errors.cc translates each to
// its mjfast.* class at the boundary (std::logic_error becomes mjfast.LogicError).
#pragma once

#include <cxxabi.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace mjfast {

class StaleGenerationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class HookOwnershipError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CameraUnavailableError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// MuJoCo raised a fatal error (mju_error) inside a call mjfast made; the data it was working on
// is in an undefined state until reset. Translated to mjfast.SimulationError.
class SimulationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A plugin's call was interrupted by the user (KeyboardInterrupt or SystemExit inside a Python
// plugin). Not a plugin failure: the plugin stays as it was, the step in progress completes and
// the interrupt is raised where unwinding is allowed. `cause` holds what was raised.
class Interrupted : public std::exception {
 public:
  explicit Interrupted(std::exception_ptr cause) : cause(std::move(cause)) {}
  const char* what() const noexcept override { return "interrupted"; }
  std::exception_ptr cause;
};

// A plugin raised during live dispatch. `cause` is what it raised (a Python exception travels
// inside as pybind11::error_already_set), rethrown at the boundary as __cause__.
class PluginDispatchError : public std::runtime_error {
 public:
  PluginDispatchError(std::string plugin_name, std::string plugin_type, std::string callback,
                      std::string cause_message, std::exception_ptr cause)
      : std::runtime_error("plugin '" + plugin_name + "' (" + plugin_type + ") raised in " +
                           callback + ": " + cause_message),
        plugin_name(std::move(plugin_name)),
        plugin_type(std::move(plugin_type)),
        callback(std::move(callback)),
        cause(std::move(cause)) {}

  std::string plugin_name;
  std::string plugin_type;
  std::string callback;
  std::exception_ptr cause;
};

// A thread that Python ends while it waits for the GIL at interpreter exit unwinds with this
// (glibc's forced unwind); a catch (...) that swallows it aborts the process. Every catch (...)
// on a path that can take the GIL rethrows it first.
#define MJFAST_RETHROW_FORCED_UNWIND \
  catch (abi::__forced_unwind&) {    \
    throw;                           \
  }

// An exception that knows where it came from as text (a Python plugin's formatted traceback):
// failure records keep it beside the message.
class TracebackCarrier {
 public:
  virtual ~TracebackCarrier() = default;
  virtual const std::string& traceback() const noexcept = 0;
};

// The message of whatever `error` holds, for failure records.
std::string describe_exception(const std::exception_ptr& error);
// The traceback text `error` carries (a TracebackCarrier's), or "".
std::string traceback_of(const std::exception_ptr& error);

}  // namespace mjfast
