// Exposes native (shared-library) plugins to the Python factory: `native_adapter(...)` builds the
// AdapterEntry for one configured plugin, and NativePluginHandle is what acquire_plugin yields
// for a native plugin.
#include <cstdint>
#include <memory>
#include <string>

#include "plugin_host.h"
#include "bindings.h"
#include "native_plugin_adapter.h"
#include "plugin_host.h"

namespace mjfast {
namespace {

// What `env.acquire_plugin(name)` yields for a native plugin: usable only on the thread that
// holds that acquire_plugin scope, while the same instance is still active.
class NativePluginHandle {
 public:
  NativePluginHandle(py::object host_object, const PluginHost* host, NativePluginAdapter* adapter)
      : host_object_(std::move(host_object)),
        host_(host),
        adapter_(adapter),
        name_(adapter->name()),
        type_(adapter->type()),
        library_(adapter->library_path()),
        symbol_(adapter->symbol()) {}

  std::string call(const std::string& command, const std::string& argument) const {
    return checked().call(command, argument);
  }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(checked().instance()); }

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const std::string& library() const { return library_; }
  const std::string& symbol() const { return symbol_; }

 private:
  NativePluginAdapter& checked() const {
    if (!host_->scope_held_by_this_thread() || host_->scoped_adapter(name_) != adapter_) {
      throw std::logic_error("native plugin '" + name_ +
                             "' was used outside the acquire_plugin() block that yielded it");
    }
    return *adapter_;
  }

  py::object host_object_;  // keeps the host (and the env core behind it) alive
  const PluginHost* host_;
  NativePluginAdapter* adapter_;
  std::string name_;
  std::string type_;
  std::string library_;
  std::string symbol_;
};

}  // namespace

py::object native_backend(const py::object& host_object, const PluginHost& host,
                          IPluginAdapter* adapter) {
  auto* native = dynamic_cast<NativePluginAdapter*>(adapter);
  if (native == nullptr) return py::none();
  return py::cast(NativePluginHandle(host_object, &host, native));
}

void bind_native(py::module_& module) {
  module.attr("PLUGIN_ABI_VERSION") = MJFAST_PLUGIN_ABI_VERSION;

  module.def(
      "native_adapter",
      [](std::string name, std::string type, std::string library_path, std::string symbol,
         const std::string& config_json) {
        auto entry = std::make_shared<FactoryEntry>();
        entry->name = name;
        entry->type = type;
        // Runs the plugin's constructor; it is native code and takes no lock that a thread
        // waiting for the GIL could hold, so the GIL stays held.
        entry->adapter = std::make_unique<NativePluginAdapter>(
            std::move(name), std::move(type), std::move(library_path), std::move(symbol),
            config_json);
        return entry;
      },
      py::arg("name"), py::arg("type"), py::arg("library_path"), py::arg("symbol"),
      py::arg("config_json"),
      "Load a native plugin (dlopen, ABI check, instantiation); RuntimeError naming the library "
      "and the reason on failure.");

  py::class_<NativePluginHandle>(module, "NativePluginHandle",
                                 "A native plugin as env.acquire_plugin() yields it.")
      .def_property_readonly("name", &NativePluginHandle::name)
      .def_property_readonly("type", &NativePluginHandle::type)
      .def_property_readonly("library", &NativePluginHandle::library)
      .def_property_readonly("symbol", &NativePluginHandle::symbol)
      .def_property_readonly("address", &NativePluginHandle::address,
                             "The raw instance pointer (the plugin's C++ object).")
      .def("call", &NativePluginHandle::call, py::arg("command"), py::arg("argument") = "",
           "Run the plugin's Plugin::call(command, argument) and return its reply.")
      .def("__repr__", [](const NativePluginHandle& handle) {
        return "<NativePluginHandle " + handle.name() + " (" + handle.type() + ")>";
      });
}

}  // namespace mjfast
