// The C++ exceptions of the core. They know nothing of Python; bind_errors.cc translates each to
// its mjfast.* class at the boundary (std::logic_error becomes mjfast.LogicError).
#pragma once

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

// The message of whatever `error` holds, for failure records.
std::string describe_exception(const std::exception_ptr& error);

}  // namespace mjfast
