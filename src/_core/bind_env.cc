// Exposes EnvCore to the Python MujocoEnv façade: binding a model, the plugin factory, stepping,
// the physics thread, pausing, statistics.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "bindings.h"
#include "env_core.h"
#include "errors.h"

namespace mjfast {
namespace {

// A Python callable kept by C++ objects whose last reference may drop on a thread without the
// GIL (a trampoline's registry lookup can hold the env alive briefly): release it under the GIL.
struct GilSafeCallable {
  py::object callable;
  ~GilSafeCallable() {
    py::gil_scoped_acquire gil;  // holds no lock here: taking the GIL cannot invert an order
    callable = py::object();
  }
};

// Keeps the physics thread attached to Python for its whole life, so that each Python callback
// only swaps the GIL instead of creating and destroying a thread state every call.
thread_local PyGILState_STATE physics_gil_state;
thread_local PyThreadState* physics_thread_state = nullptr;

mjModel* model_at(std::uintptr_t address) { return reinterpret_cast<mjModel*>(address); }
mjData* data_at(std::uintptr_t address) { return reinterpret_cast<mjData*>(address); }

}  // namespace

void bind_env(py::module_& module) {
  py::class_<EnvCore, std::shared_ptr<EnvCore>>(module, "EnvCore")
      .def(py::init([] {
        std::shared_ptr<EnvCore> env(new EnvCore(), [](EnvCore* core) {
          // The last reference may go in Python's dealloc, with the GIL held: closing joins the
          // physics thread, which may be waiting for the GIL in a Python callback.
          if (Py_IsInitialized() && PyGILState_Check()) {
            py::gil_scoped_release release;
            delete core;
          } else {
            delete core;
          }
        });
        EnvCore::ThreadHooks thread_hooks;
        thread_hooks.on_start = [] {
          physics_gil_state = PyGILState_Ensure();
          physics_thread_state = PyEval_SaveThread();
        };
        thread_hooks.on_exit = [] {
          PyEval_RestoreThread(physics_thread_state);
          PyGILState_Release(physics_gil_state);
        };
        thread_hooks.on_error = [](std::exception_ptr error) {
          py::gil_scoped_acquire gil;  // the physics thread holds no lock here
          py::module_::import("logging")
              .attr("getLogger")("mjfast.env")
              .attr("error")("physics thread: %s (the plugin was stopped; the others run on)",
                             describe_exception(error));
        };
        env->set_thread_hooks(std::move(thread_hooks));
        return env;
      }))
      .def(
          "bind",
          [](EnvCore& env, std::uintptr_t model_address, std::uintptr_t data_address,
             std::uintptr_t control_scratch_address) {
            py::gil_scoped_release release;  // takes the host and control mutexes
            env.bind(model_at(model_address), data_at(data_address),
                     data_at(control_scratch_address));
          },
          py::arg("model_address"), py::arg("data_address"), py::arg("control_scratch_address"),
          "Bind the mjModel*/mjData* at these addresses (the Python objects must outlive them).")
      .def(
          "set_factory",
          [](EnvCore& env, py::object factory) {
            auto callable = std::make_shared<GilSafeCallable>();
            callable->callable = std::move(factory);
            auto wrapped = [callable](ModelGeneration model_generation,
                                      PluginGeneration plugin_generation) {
              py::gil_scoped_acquire gil;  // called by the host under its mutex, GIL released
              py::object entries =
                  callable->callable(model_generation.value(), plugin_generation.value());
              return take_factory_entries(entries);
            };
            py::gil_scoped_release release;  // takes the host mutex
            env.host().set_factory(std::move(wrapped));
          },
          py::arg("factory"))
      .def("load_next_plugin_generation", &EnvCore::load_next_plugin_generation,
           py::call_guard<py::gil_scoped_release>())  // loads re-take the GIL per plugin
      .def("step", &EnvCore::step, py::arg("n") = 1,
           // Released for the whole loop; a Python plugin re-takes it around its own call.
           py::call_guard<py::gil_scoped_release>())
      .def("start", &EnvCore::start, py::arg("realtime_factor"),
           py::call_guard<py::gil_scoped_release>())
      .def("stop", &EnvCore::stop,
           // The physics thread may be waiting for the GIL in a Python callback.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("running", &EnvCore::running)
      .def("pause", &EnvCore::pause,
           py::call_guard<py::gil_scoped_release>())  // waits for the step in progress
      // resume notifies the physics thread; reset_plugins and notify_geometry_changed take the
      // bridge and host mutexes and call Python plugins, which re-take the GIL.
      .def("resume", &EnvCore::resume, py::call_guard<py::gil_scoped_release>())
      .def("reset_plugins", &EnvCore::reset_plugins, py::call_guard<py::gil_scoped_release>())
      .def("notify_geometry_changed", &EnvCore::notify_geometry_changed, py::arg("geom_id"),
           py::call_guard<py::gil_scoped_release>())
      // Joins the physics thread, which may wait for the GIL in a Python callback.
      .def("close", &EnvCore::close, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("model_generation",
                             [](const EnvCore& env) { return env.model_generation().value(); })
      .def_property_readonly("plugin_generation",
                             [](const EnvCore& env) { return env.plugin_generation().value(); })
      .def_property_readonly(
          "host", [](EnvCore& env) -> PluginHost& { return env.host(); },
          py::return_value_policy::reference_internal)
      // ---- Simulation control (SPEC §13) ----
      // pause_stepping waits for the step in progress; the others take thread_mutex_ only.
      .def("pause_stepping", &EnvCore::pause_stepping, py::call_guard<py::gil_scoped_release>())
      .def("resume_stepping", &EnvCore::resume_stepping,
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("stepping_paused", &EnvCore::stepping_paused)
      .def_property_readonly("step_count", &EnvCore::step_count)
      .def("reset_step_count", &EnvCore::reset_step_count)
      .def("set_realtime_factor", &EnvCore::set_realtime_factor, py::arg("realtime_factor"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("realtime_factor", &EnvCore::realtime_factor)
      .def("measured_realtime_factor", &EnvCore::measured_realtime_factor,
           py::call_guard<py::gil_scoped_release>())  // takes the statistics mutex
      .def(
          "set_reset_request_handler",
          [](EnvCore& env, py::object handler) {
            auto callable = std::make_shared<GilSafeCallable>();
            callable->callable = std::move(handler);
            env.set_reset_request_handler([callable](const std::optional<std::string>& keyframe) {
              // On the stepping thread at a step boundary, holding step_mutex_ (before the GIL
              // in the lock order) and no other lock.
              py::gil_scoped_acquire gil;
              callable->callable(keyframe ? py::object(py::str(*keyframe)) : py::none());
            });
          },
          py::arg("handler"),
          "handler(keyframe | None) carries out a plugin's reset request at a step boundary.")
      .def("statistics", [](const EnvCore& env) {
        const EnvStatistics stats = env.statistics();
        py::dict result;
        result["steps"] = stats.steps;
        result["stepping_wall_s"] = stats.stepping_wall_s;
        result["simulated_s"] = stats.simulated_s;
        result["mean_step_ns"] =
            stats.steps ? stats.stepping_wall_s * 1e9 / static_cast<double>(stats.steps) : 0.0;
        // Achieved: simulated time over the wall time it took, physics thread pacing included.
        result["realtime_factor"] =
            stats.elapsed_wall_s > 0 ? stats.simulated_s / stats.elapsed_wall_s : 0.0;
        result["elapsed_wall_s"] = stats.elapsed_wall_s;
        result["running"] = stats.running;
        return result;
      });
}

}  // namespace mjfast
