// Exposes native (shared-library) plugins to the Python factory: `native_adapter(...)` builds the
// AdapterEntry for one configured plugin, and NativePluginHandle is what acquire_plugin yields
// for a native plugin.
#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bind/bindings.h"
#include "native/native_host_services.h"
#include "native/native_plugin_adapter.h"
#include "plugin_host/plugin_host.h"
#include "render/camera_handle.h"

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
  // Runs the plugin's render callback into the caller's scene (mujoco.MjvScene), e.g. to draw
  // what it visualises in a scene of one's own.
  void render_callback(const py::object& model, const py::object& data,
                       const py::object& scene) const {
    NativePluginAdapter& adapter = checked();
    const auto address = [](const py::object& object, const char* what) {
      if (!py::hasattr(object, interned("_address"))) {
        throw py::type_error(std::string(what) + " must be a mujoco." + what + ", got " +
                             py::str(py::type::of(object).attr("__name__")).cast<std::string>());
      }
      return object.attr(interned("_address")).cast<std::uintptr_t>();
    };
    auto* m = reinterpret_cast<const mjModel*>(address(model, "MjModel"));
    auto* d = reinterpret_cast<mjData*>(address(data, "MjData"));
    // mujoco.MjvScene does not expose its address, but its `flags` array views the struct's own
    // field (as RenderCore's scenes are found, bind_render.cc).
    if (!py::hasattr(scene, interned("flags")) || !py::hasattr(scene, interned("maxgeom"))) {
      throw py::type_error("scene must be a mujoco.MjvScene, got " +
                           py::str(py::type::of(scene).attr("__name__")).cast<std::string>());
    }
    const auto flags = scene.attr(interned("flags"))
                           .attr(interned("ctypes"))
                           .attr(interned("data"))
                           .cast<std::uintptr_t>();
    auto* s = reinterpret_cast<mjvScene*>(flags - offsetof(mjvScene, flags));
    if (s->maxgeom != scene.attr(interned("maxgeom")).cast<int>()) {
      throw std::runtime_error("mujoco.MjvScene layout is not the one mjfast was built against");
    }
    if ((adapter.callbacks() & mask_of(Callback::kRender)) == 0) return;
    adapter.render(m, d, s);
  }
  std::map<std::string, double> statistics() const { return checked().statistics(); }
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

// The C++ side of env.open_offscreen_camera for a native plugin's load(): calls the env's Python
// opener (camera parameters live with the env's parameter server) and keeps the C++ handle behind
// the returned OffscreenCamera. Python errors become C++ ones the host services translate:
// mjfast.LogicError -> std::logic_error, anything else -> std::runtime_error with its message.
CameraOpener python_camera_opener(py::object opener) {
  if (opener.is_none()) return {};
  // The adapter may be destroyed on a thread without the GIL.
  const GilSafeObject held(std::move(opener));
  return [held](const std::string& name) -> std::shared_ptr<CameraHandle> {
    // Called from the instance's load(), which the host runs under its mutex on a thread that
    // released the GIL, exactly like a Python plugin's load() taking it to open a camera.
    py::gil_scoped_acquire gil;
    try {
      return held.get()(name).cast<std::shared_ptr<CameraHandle>>();
    } catch (py::error_already_set& error) {
      const py::object value = error.value();
      // str(KeyError) quotes its message; the message itself reads better in a load failure.
      const bool key_error =
          py::isinstance(value, py::handle(PyExc_KeyError)) && py::len(value.attr("args")) == 1;
      std::string message = py::str(key_error ? value.attr("args")[py::int_(0)] : value);
      const py::object logic_error = py::module_::import("mjfast.errors").attr("LogicError");
      if (py::isinstance(value, logic_error)) throw std::logic_error(message);
      // Anything but a RuntimeError (CameraUnavailableError is one) keeps its type's name.
      if (!py::isinstance(value, py::handle(PyExc_RuntimeError))) {
        message = py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>() + ": " +
                  message;
      }
      throw std::runtime_error(message);
    }
  };
}

// The C++ side of a native plugin's publish(): the env's `publisher(topic, message)` (its plugin
// node's publish, so topics resolve as a Python plugin's do), called with the GIL taken for this
// publication only. The fields were checked already; arrays are copied into new numpy arrays.
Publisher python_publisher(py::object publisher) {
  if (publisher.is_none()) return {};
  const GilSafeObject held(std::move(publisher));
  return [held](const std::string& topic, const mjfast_message_field* fields, std::size_t count) {
    py::gil_scoped_acquire gil;
    try {
      py::dict message;
      for (std::size_t i = 0; i < count; ++i) {
        const mjfast_message_field& field = fields[i];
        py::object value;
        if (field.type == MJFAST_FIELD_STRING) {
          value = py::str(static_cast<const char*>(field.data));
        } else if (field.ndim == 0) {
          switch (field.type) {
            case MJFAST_FIELD_FLOAT64:
              value = py::float_(*static_cast<const double*>(field.data));
              break;
            case MJFAST_FIELD_FLOAT32:
              value = py::float_(*static_cast<const float*>(field.data));
              break;
            case MJFAST_FIELD_INT64:
              value = py::int_(*static_cast<const std::int64_t*>(field.data));
              break;
            case MJFAST_FIELD_INT32:
              value = py::int_(*static_cast<const std::int32_t*>(field.data));
              break;
            default: value = py::int_(*static_cast<const std::uint8_t*>(field.data)); break;
          }
        } else {
          py::dtype dtype = field.type == MJFAST_FIELD_FLOAT64   ? py::dtype::of<double>()
                            : field.type == MJFAST_FIELD_FLOAT32 ? py::dtype::of<float>()
                            : field.type == MJFAST_FIELD_INT64   ? py::dtype::of<std::int64_t>()
                            : field.type == MJFAST_FIELD_INT32   ? py::dtype::of<std::int32_t>()
                                                                 : py::dtype::of<std::uint8_t>();
          std::vector<py::ssize_t> shape(field.shape, field.shape + field.ndim);
          py::array array(dtype, shape);  // owns its memory: the plugin's buffer is reused
          if (array.nbytes() > 0) std::memcpy(array.mutable_data(), field.data, array.nbytes());
          value = std::move(array);
        }
        message[py::str(field.key)] = std::move(value);
      }
      held.get()(topic, message);
    } catch (py::error_already_set& error) {
      const py::object value = error.value();
      std::string text = py::str(value);
      const py::object logic_error = py::module_::import("mjfast.errors").attr("LogicError");
      if (py::isinstance(value, logic_error)) throw std::logic_error(text);
      throw std::runtime_error(
          py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>() + ": " + text);
    }
  };
}

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
         const std::string& config_json, py::object camera_opener, py::object publisher,
         std::int64_t world_index) {
        auto entry = std::make_shared<FactoryEntry>();
        entry->name = name;
        entry->type = type;
        // Runs the plugin's constructor; it is native code and takes no lock that a thread
        // waiting for the GIL could hold, so the GIL stays held.
        entry->adapter = std::make_unique<NativePluginAdapter>(
            std::move(name), std::move(type), std::move(library_path), std::move(symbol),
            config_json, python_camera_opener(std::move(camera_opener)),
            python_publisher(std::move(publisher)), world_index);
        return entry;
      },
      py::arg("name"), py::arg("type"), py::arg("library_path"), py::arg("symbol"),
      py::arg("config_json"), py::arg("camera_opener") = py::none(),
      py::arg("publisher") = py::none(), py::arg("world_index") = 0,
      "Load a native plugin (dlopen, ABI check, instantiation); RuntimeError naming the library "
      "and the reason on failure. `camera_opener(name)` -> OffscreenCamera serves the plugin's "
      "open_offscreen_camera() during its load(); `publisher(topic, message)` its publish(); "
      "`world_index` is its world's in a VectorEnv (0 in a MujocoEnv).");

  py::class_<NativePluginHandle>(module, "NativePluginHandle",
                                 "A native plugin as env.acquire_plugin() yields it.")
      .def_property_readonly("name", &NativePluginHandle::name)
      .def_property_readonly("type", &NativePluginHandle::type)
      .def_property_readonly("library", &NativePluginHandle::library)
      .def_property_readonly("symbol", &NativePluginHandle::symbol)
      .def_property_readonly("address", &NativePluginHandle::address,
                             "The raw instance pointer (the plugin's C++ object).")
      .def("render_callback", &NativePluginHandle::render_callback, py::arg("model"),
           py::arg("data"), py::arg("scene"),
           "Run the plugin's render callback into `scene` (a mujoco.MjvScene).")
      .def("statistics", &NativePluginHandle::statistics,
           "The plugin's figures: its reply to call('statistics'), a JSON object of numbers.")
      .def("call", &NativePluginHandle::call, py::arg("command"), py::arg("argument") = "",
           "Run the plugin's Plugin::call(command, argument) and return its reply.")
      .def("__repr__", [](const NativePluginHandle& handle) {
        return "<NativePluginHandle " + handle.name() + " (" + handle.type() + ")>";
      });
}

}  // namespace mjfast
