// Exposes PluginHost (as env.host) and the factory entries the Python side builds: a Python
// plugin wrapped in its adapter, or a factory failure.
#include <memory>
#include <optional>
#include <string>

#include "bind/bindings.h"
#include "bind/python_plugin_adapter.h"
#include "bind/python_scene_registry.h"
#include "common/call_context.h"
#include "common/errors.h"
#include "common/hooks.h"
#include "plugin_host/plugin_host.h"

namespace mjfast {
namespace {

const char* state_name(PluginState state) {
  switch (state) {
    case PluginState::kRegistered: return "REGISTERED";
    case PluginState::kInstantiated: return "INSTANTIATED";
    case PluginState::kLoaded: return "LOADED";
    case PluginState::kActive: return "ACTIVE";
    case PluginState::kFailed: return "FAILED";
    case PluginState::kUnloaded: return "UNLOADED";
  }
  return "UNKNOWN";
}

py::dict report_to_dict(const PluginReport& report) {
  py::dict callbacks;
  for (std::size_t i = 0; i < kCallbackCount; ++i) {
    const auto callback = static_cast<Callback>(i);
    if (!(report.callbacks & mask_of(callback))) continue;
    const CallbackStats& stats = report.callback_stats[i];
    py::dict entry;
    entry["calls"] = stats.calls;
    entry["timed_calls"] = stats.timed_calls;
    entry["mean_ns"] = mean_or_zero(stats.timed_total_ns, stats.timed_calls);
    entry["last_ns"] = stats.last_ns;
    callbacks[report.callback_names[i] ? report.callback_names[i] : callback_name(callback)] =
        entry;
  }
  py::dict result;
  result["name"] = report.name;
  result["type"] = report.type;
  result["state"] = state_name(report.state);
  if (report.failure) {
    result["failure"] =
        py::make_tuple(report.failure->phase, report.failure->message, report.failure->traceback);
  } else {
    result["failure"] = py::none();
  }
  result["load_time_s"] = report.load_time_s;
  result["reset_time_s"] = report.reset_time_s;
  result["callbacks"] = callbacks;
  result["custom"] = report.custom;
  result["statistics_error"] =
      report.statistics_error.empty() ? py::object(py::none()) : py::str(report.statistics_error);
  return result;
}

// A direct call's tag: the given model generation, or none (the active one, read under the
// dispatch's own lock).
std::optional<ModelGeneration> tag_of(std::optional<std::uint64_t> tag) {
  if (!tag) return std::nullopt;
  return ModelGeneration(*tag);
}

// Runs one direct dispatch from Python: GIL released (the dispatch takes the host mutex and each
// Python plugin re-takes the GIL), and a plugin error raised at once.
template <class Dispatch>
void dispatch_from_python(Dispatch&& dispatch) {
  // A dispatch nested in another (a plugin calling env.host.dispatch_*) would iterate the tables
  // the outer one is iterating.
  if (hooks::in_dispatch()) {
    call_context::refuse(call_context::Refusal::kPluginCallback, "host dispatch");
  }
  DispatchError error;
  {
    py::gil_scoped_release release;  // lock order is host mutex -> GIL: never wait holding the GIL
    hooks::DispatchScope dispatching;
    error = dispatch();
  }
  if (error) std::rethrow_exception(error);
}

// kCallbacks for Python, in dispatch order: (name, MujocoPlugin method, ControlPlugin method),
// None where that base class has no such callback.
py::tuple callbacks_table() {
  py::tuple table(kCallbackCount);
  for (std::size_t i = 0; i < kCallbackCount; ++i) {
    const CallbackInfo& info = kCallbacks[i];
    // pybind11 casts a null const char* to None.
    table[i] =
        py::make_tuple(callback_name(info.callback), info.mujoco_method, info.control_method);
  }
  return table;
}

// kLifecycle for Python, in its order: (MujocoPlugin method, ControlPlugin method).
py::tuple lifecycle_table() {
  py::tuple table(std::size(kLifecycle));
  for (std::size_t i = 0; i < std::size(kLifecycle); ++i) {
    table[i] = py::make_tuple(kLifecycle[i].mujoco_method, kLifecycle[i].control_method);
  }
  return table;
}

}  // namespace

void bind_plugin_host(py::module_& module) {
  module.attr("CALLBACKS") = callbacks_table();
  module.attr("LIFECYCLE") = lifecycle_table();
  py::class_<DueWindow>(module, "DueWindow",
                        "A rate plugin's window of simulated times with nothing due, [low, "
                        "high): a Python plugin that sets it as its __mjfast_due_window__ has its "
                        "last_stage_callback called only at the other steps, and those steps "
                        "take no GIL for it. Empty (every step due) until set.")
      .def(py::init<>())
      .def("set", &DueWindow::set, py::arg("low"), py::arg("high"),
           "Sets the window: the steps whose time t has low <= t < high are not due.")
      .def("get", &DueWindow::get, "(low, high)")
      .def("not_due", &DueWindow::not_due, py::arg("time"),
           "Whether a step at `time` skips the callback.");
  py::class_<FactoryEntry, std::shared_ptr<FactoryEntry>>(module, "AdapterEntry")
      .def_readonly("name", &FactoryEntry::name)
      .def_readonly("type", &FactoryEntry::type)
      .def_readonly("error", &FactoryEntry::error);

  module.def(
      "python_adapter",
      [](std::string name, std::string type, py::object instance, const std::string& style,
         py::object model, py::object data, py::object control_data, py::object node,
         const py::iterable& callbacks, bool stateful) {
        auto entry = std::make_shared<FactoryEntry>();
        entry->name = std::move(name);
        entry->type = std::move(type);
        const auto adapter_style = style == "control" ? PythonPluginAdapter::Style::kControl
                                                      : PythonPluginAdapter::Style::kMujoco;
        entry->adapter = std::make_unique<PythonPluginAdapter>(
            std::move(instance), adapter_style, std::move(model), std::move(data),
            std::move(control_data), std::move(node), callbacks, stateful);
        return entry;
      },
      py::arg("name"), py::arg("type"), py::arg("instance"), py::arg("style"), py::arg("model"),
      py::arg("data"), py::arg("control_data"), py::arg("node"), py::arg("callbacks"),
      py::arg("stateful") = false);

  module.def(
      "failed_adapter",
      [](std::string name, std::string type, std::string message, std::string traceback) {
        auto entry = std::make_shared<FactoryEntry>();
        entry->name = std::move(name);
        entry->type = std::move(type);
        entry->error = std::move(message);
        entry->traceback = std::move(traceback);
        return entry;
      },
      py::arg("name"), py::arg("type"), py::arg("message"), py::arg("traceback") = "");

  module.def(
      "interrupted_adapter",
      [](std::string name, std::string type, const py::object& interrupt) {
        if (!PyExceptionInstance_Check(interrupt.ptr())) {
          throw py::type_error("interrupted_adapter() needs the exception that interrupted");
        }
        auto entry = std::make_shared<FactoryEntry>();
        entry->name = std::move(name);
        entry->type = std::move(type);
        entry->error = "interrupted";
        // Raised again, as it was (its traceback included), once the generation is up.
        PyErr_Restore(py::type::of(interrupt).inc_ref().ptr(), interrupt.inc_ref().ptr(),
                      PyException_GetTraceback(interrupt.ptr()));
        entry->interrupt =
            std::make_exception_ptr(Interrupted(std::make_exception_ptr(py::error_already_set())));
        return entry;
      },
      py::arg("name"), py::arg("type"), py::arg("interrupt"),
      "The factory entry of a plugin whose creation the user interrupted (KeyboardInterrupt, "
      "SystemExit): left unloaded, not failed; the interrupt is raised after the others load.");

  py::class_<PluginHost> host_class(module, "PluginHost");
  host_class
      .def(
          "load_generation",
          [](PluginHost& host, std::uint64_t model_generation, std::uint64_t plugin_generation) {
            py::gil_scoped_release release;  // the factory and loads re-take the GIL as needed
            host.load_generation(ModelGeneration(model_generation),
                                 PluginGeneration(plugin_generation));
          },
          py::arg("model_generation"), py::arg("plugin_generation"))
      .def("quiesce_and_destroy", &PluginHost::quiesce_and_destroy,
           py::call_guard<py::gil_scoped_release>())  // unloads re-take the GIL
      // Each getter takes the host mutex, so it waits without the GIL.
      .def_property_readonly("generation_active",
                             [](const PluginHost& h) {
                               py::gil_scoped_release release;
                               return h.generation_active();
                             })
      .def_property_readonly("model_generation",
                             [](const PluginHost& h) {
                               py::gil_scoped_release release;
                               return h.model_generation().value();
                             })
      .def_property_readonly("plugin_generation",
                             [](const PluginHost& h) {
                               py::gil_scoped_release release;
                               return h.plugin_generation().value();
                             })
      .def(
          "dispatch_render",
          [](PluginHost& host, py::object scene, std::optional<std::uint64_t> tag) {
            // The scene is registered for the call, so that Python plugins receive this object.
            mjvScene* raw = register_python_scene(scene);
            try {
              dispatch_from_python(
                  [&] { return host.dispatch_bound(Callback::kRender, tag_of(tag), raw); });
            } catch (...) {
              unregister_python_scene(raw);
              throw;
            }
            unregister_python_scene(raw);
          },
          py::arg("scene"), py::arg("model_generation") = py::none(),
          "Dispatch render_callback with `scene` (a mujoco.MjvScene of the env's model).")
      .def(
          "reset",
          [](PluginHost& host, std::optional<std::uint64_t> tag) {
            dispatch_from_python([&] { return host.reset(tag_of(tag)); });
          },
          py::arg("model_generation") = py::none())
      .def(
          "notify_geometry_changed",
          [](PluginHost& host, int geom_id, std::optional<std::uint64_t> tag) {
            dispatch_from_python(
                [&] { return host.notify_geometry_changed(tag_of(tag), geom_id); });
          },
          py::arg("geom_id"), py::arg("model_generation") = py::none())
      .def("report",
           [](const PluginHost& host) {
             std::vector<PluginReport> reports;
             {
               py::gil_scoped_release release;  // takes the host mutex
               reports = host.report();
             }
             py::list result;
             for (const PluginReport& report : reports) result.append(report_to_dict(report));
             return result;
           })
      .def("_acquire_scope", &PluginHost::acquire_scope,
           py::call_guard<py::gil_scoped_release>())  // may wait for a dispatch to finish
      .def("_release_scope", &PluginHost::release_scope)
      .def("_scope_held", &PluginHost::scope_held_by_this_thread)
      .def("_in_callback", &PluginHost::held_by_this_thread)
      .def("_scoped_backend", [](const py::object& self, const std::string& name) -> py::object {
        const auto& host = self.cast<const PluginHost&>();
        if (!host.scope_held_by_this_thread()) {
          throw std::logic_error("_scoped_backend needs the acquire_plugin scope");
        }
        IPluginAdapter* adapter = host.scoped_adapter(name);
        if (adapter == nullptr) return py::none();
        if (auto* python = dynamic_cast<PythonPluginAdapter*>(adapter)) return python->instance();
        return native_backend(self, host, adapter);
      });
  // dispatch_<callback> for the callbacks a Python caller dispatches with the host's bound model
  // and data alone (dispatch_render takes a scene, notify_geometry_changed a geom).
  for (const Callback callback : {Callback::kControl, Callback::kPassive, Callback::kLastStage}) {
    const std::string name(callback_name(callback));
    host_class.def(
        ("dispatch_" + name.substr(0, name.rfind('_'))).c_str(),
        [callback](PluginHost& host, std::optional<std::uint64_t> tag) {
          dispatch_from_python([&] { return host.dispatch_bound(callback, tag_of(tag)); });
        },
        py::arg("model_generation") = py::none());
  }

  module.attr("TIMING_SAMPLE_INTERVAL") = PluginHost::kTimingSampleInterval;
}

std::vector<FactoryEntry> take_factory_entries(const py::handle& entries) {
  std::vector<FactoryEntry> result;
  for (py::handle item : entries) {
    auto entry = item.cast<std::shared_ptr<FactoryEntry>>();
    FactoryEntry taken;
    taken.name = entry->name;
    taken.type = entry->type;
    taken.adapter = std::move(entry->adapter);
    taken.error = entry->error;
    taken.traceback = entry->traceback;
    taken.interrupt = entry->interrupt;
    if (!taken.adapter && taken.error.empty() && !taken.interrupt) {
      taken.error = "adapter entry '" + taken.name + "' was already consumed";
    }
    result.push_back(std::move(taken));
  }
  return result;
}

}  // namespace mjfast
