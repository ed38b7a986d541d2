// Exposes EnvCore to the Python MujocoEnv façade: binding a model, the plugin factory, stepping,
// the physics thread, pausing, statistics, state.
#include <pybind11/numpy.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bind/bindings.h"
#include "common/errors.h"
#include "env/env_core.h"

namespace mjfast {
namespace {

// reset_world's target from Python: a keyframe index (-1: none) and optional whole qpos/qvel.
EnvCore::ResetTarget reset_target_of(int keyframe, const py::object& qpos, const py::object& qvel,
                                     bool keep_time) {
  EnvCore::ResetTarget target;
  target.keyframe = keyframe;
  if (!qpos.is_none()) target.qpos = qpos.cast<std::vector<double>>();
  if (!qvel.is_none()) target.qvel = qvel.cast<std::vector<double>>();
  target.keep_time = keep_time;
  return target;
}

// The Python context manager of EnvCore.lifecycle(): a call_context::LifecycleMark for its block.
struct LifecycleContext {
  const EnvCore* env;
  std::string operation;
  std::unique_ptr<call_context::LifecycleMark> mark;
};

// A real number from Python (numbers.Real, not a bool) as a double: an int too large for a float
// is an infinity of its sign; anything else is NaN, which every caller's rule refuses.
double real_number_of(const py::handle& number) {
  if (PyBool_Check(number.ptr()) ||
      !py::isinstance(number, py::module_::import("numbers").attr("Real"))) {
    return std::nan("");
  }
  const double value = PyFloat_AsDouble(number.ptr());
  if (value == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    const bool negative = PyObject_RichCompareBool(number.ptr(), py::int_(0).ptr(), Py_LT) == 1;
    if (PyErr_Occurred()) PyErr_Clear();
    return negative ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  }
  return value;
}

// A real-time factor from Python, by EnvCore's one rule: None, or a real number (not a bool)
// that is positive and finite; anything else is refused with the rule's message, naming it as
// Python shows it.
std::optional<double> realtime_factor_of(const py::handle& factor) {
  if (factor.is_none()) return std::nullopt;
  return EnvCore::checked_realtime_factor(real_number_of(factor),
                                          py::repr(factor).cast<std::string>());
}

// Keeps the physics thread attached to Python for its whole life, so that each Python callback
// only swaps the GIL instead of creating and destroying a thread state every call.
thread_local PyGILState_STATE physics_gil_state;
thread_local PyThreadState* physics_thread_state = nullptr;

mjModel* model_at(std::uintptr_t address) { return reinterpret_cast<mjModel*>(address); }
mjData* data_at(std::uintptr_t address) { return reinterpret_cast<mjData*>(address); }

// Python delivers signals to its main thread only: a step() called there polls for them.
unsigned long main_thread_ident = 0;  // set when the module is imported

// The interrupt poll of a step() on the main thread: runs Python's signal handlers and returns
// what they raised (KeyboardInterrupt for Ctrl-C), with Python's error indicator cleared.
std::exception_ptr poll_signals() {
  py::gil_scoped_acquire gil;  // step() holds no lock between steps, where this runs
  if (PyErr_CheckSignals() == 0) return nullptr;
  return std::make_exception_ptr(py::error_already_set());
}

// A Python int as a message shows it: its str, or for one too long to print (str() of a huge int
// may itself fail, at Python's digit limit) its size.
std::string shown_integer(const py::handle& value) {
  const auto bits = value.attr("bit_length")().cast<std::int64_t>();
  if (bits <= 256) return py::str(value).cast<std::string>();
  return std::string(value < py::int_(0) ? "-" : "") + "an integer of " + std::to_string(bits) +
         " bits";
}

// start()'s steps: None (until stop()), or what operator.index() takes but a bool, in
// 0..2**64-1. Anything else is a ValueError naming it (as for start()'s realtime_factor).
std::optional<std::uint64_t> step_budget_of(const py::handle& steps) {
  if (steps.is_none()) return std::nullopt;
  const auto refuse = [](const std::string& shown) {
    return py::value_error("start(steps) takes None or an integer 0 <= steps <= 2**64-1, got " +
                           shown);
  };
  PyObject* index = PyBool_Check(steps.ptr()) ? nullptr : PyNumber_Index(steps.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw refuse(py::repr(steps).cast<std::string>());
  }
  const py::object value = py::reinterpret_steal<py::object>(index);
  const unsigned long long count = PyLong_AsUnsignedLongLong(index);
  if (count == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();  // negative, or too large
    throw refuse(shown_integer(value));
  }
  return static_cast<std::uint64_t>(count);
}

// wait()'s timeout: None (no limit), or a real number (not a bool) >= 0, inf included (an int
// too large for a float is as good as no limit).
std::optional<double> wait_timeout_of(const py::handle& timeout) {
  if (timeout.is_none()) return std::nullopt;
  const double value = real_number_of(timeout);
  if (!(value >= 0.0)) {
    throw py::value_error("wait(timeout) takes None or a number of seconds >= 0, got " +
                          py::repr(timeout).cast<std::string>());
  }
  return value;
}

}  // namespace

// step()'s n: what operator.index() takes (int, numpy integers, bool), in 0..2**63-1. Anything else
// is a TypeError naming the type, and an integer out of range a ValueError naming the limit, not
// pybind11's "incompatible function arguments" (which shows the env object's address).
std::int64_t step_count_of(const py::handle& n) {
  PyObject* index = PyNumber_Index(n.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw py::type_error(std::string("step(n) takes an integer 0 <= n <= 2**63-1, got ") +
                         Py_TYPE(n.ptr())->tp_name);
  }
  const py::object value = py::reinterpret_steal<py::object>(index);
  int overflow = 0;
  const long long count = PyLong_AsLongLongAndOverflow(index, &overflow);
  if (overflow == 0 && count >= 0) return count;
  throw py::value_error("step(n) needs n >= 0 and <= 2**63-1, got " + shown_integer(value));
}

void bind_env(py::module_& module) {
  main_thread_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  module.def(
      "checked_realtime_factor",
      [](const py::object& realtime_factor) { return realtime_factor_of(realtime_factor); },
      py::arg("realtime_factor"),
      "realtime_factor as a float, or None; ValueError unless it is None or a positive finite "
      "number (the rule of EnvCore.start and EnvCore.set_realtime_factor).");
  py::class_<LifecycleContext>(module, "LifecycleContext")
      .def("__enter__",
           [](LifecycleContext& self) {
             self.mark = std::make_unique<call_context::LifecycleMark>(self.env, self.operation);
           })
      .def("__exit__", [](LifecycleContext& self, const py::args&) { self.mark.reset(); });
  module.def(
      "refusal",
      [](const std::string& kind, const std::string& what, const std::string& inside) {
        return call_context::refusal(call_context::refusal_named(kind), what, inside);
      },
      py::arg("kind"), py::arg("what"), py::arg("inside") = "",
      "The message mjfast refuses `what` with inside the context `kind` (call_context.h).");

  py::class_<EnvCore, std::shared_ptr<EnvCore>>(module, "EnvCore")
      .def(py::init([](bool render_sync) {
             std::shared_ptr<EnvCore> env(new EnvCore(render_sync), [](EnvCore* core) {
               // The last reference may go in Python's dealloc, with the GIL held: closing joins
               // the physics thread, which may be waiting for the GIL in a Python callback.
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
             // Render callbacks get a mujoco.MjvScene for the very scene that is rendered.
             env->render_core().set_scene_provider(python_scene_provider());
             return env;
           }),
           py::arg("render_sync") = false)
      .def(
          "bind",
          [](EnvCore& env, py::object model, py::object data, py::object control_scratch) {
            const auto address = [](const py::object& object) {
              return object.attr(interned("_address")).cast<std::uintptr_t>();
            };
            const auto model_address = address(model);
            const auto data_address = address(data);
            // None: no scratch until a plugin with update_read/update_write loads.
            const auto scratch_address =
                control_scratch.is_none() ? std::uintptr_t{0} : address(control_scratch);
            // The core keeps the three Python objects (their memory) alive for as long as it may
            // point into them; the last reference may go on a thread without the GIL.
            const GilSafeObject owner(py::make_tuple(model, data, control_scratch));
            py::gil_scoped_release release;  // takes the host and control mutexes
            env.bind(model_at(model_address), data_at(data_address), data_at(scratch_address),
                     owner.share());
          },
          py::arg("model"), py::arg("data"), py::arg("control_scratch"),
          "Bind a mujoco.MjModel, its MjData and the control bridge's scratch MjData (or None, "
          "until set_control_scratch); the core holds them until they are replaced and no thread "
          "can reach them.")
      .def(
          "set_control_scratch",
          [](EnvCore& env, py::object control_scratch) {
            const auto scratch_address =
                control_scratch.attr(interned("_address")).cast<std::uintptr_t>();
            const GilSafeObject owner(std::move(control_scratch));
            py::gil_scoped_release release;  // takes the control mutex
            env.set_control_scratch(data_at(scratch_address), owner.share());
          },
          py::arg("control_scratch"),
          "Give the control bridge its scratch MjData (for the bound model), which bind() was "
          "given None for.")
      .def_property_readonly("has_control_scratch", &EnvCore::has_control_scratch)
      .def(
          "set_factory",
          [](EnvCore& env, py::object factory) {
            const GilSafeObject callable(std::move(factory));
            auto wrapped = [callable](ModelGeneration model_generation,
                                      PluginGeneration plugin_generation) {
              py::gil_scoped_acquire gil;  // called by the host under its mutex, GIL released
              py::object entries =
                  callable.get()(model_generation.value(), plugin_generation.value());
              return take_factory_entries(entries);
            };
            py::gil_scoped_release release;  // takes the host mutex
            env.host().set_factory(std::move(wrapped));
          },
          py::arg("factory"))
      .def("load_next_plugin_generation", &EnvCore::load_next_plugin_generation,
           py::call_guard<py::gil_scoped_release>())  // loads re-take the GIL per plugin
      .def(
          "step",
          [](EnvCore& env, const py::object& count) {
            const std::int64_t n = step_count_of(count);
            const bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
            const EnvCore::InterruptPoll poll(poll_signals);
            // Released for the whole loop; a Python plugin (and the interrupt poll) re-takes it.
            without_gil([&] { env.step(n, on_main_thread ? &poll : nullptr); });
          },
          py::arg("n") = 1,
          "Run n physics steps (0 <= n <= 2**63-1); Ctrl-C stops after the step in progress.")
      .def("clear_simulation_fault", &EnvCore::clear_simulation_fault)
      .def("check_open", &EnvCore::check_open, py::arg("what"))
      .def(
          "start",
          [](EnvCore& env, const py::object& realtime_factor, const py::object& steps) {
            const std::optional<double> factor = realtime_factor_of(realtime_factor);
            const std::optional<std::uint64_t> budget = step_budget_of(steps);
            without_gil([&] { env.start(factor, budget); });
          },
          py::arg("realtime_factor"), py::arg("steps") = py::none(),
          "Start the physics thread; with `steps`, it stops by itself after exactly that many.")
      .def(
          "wait",
          [](EnvCore& env, const py::object& timeout) {
            const std::optional<double> limit = wait_timeout_of(timeout);
            const bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
            const EnvCore::InterruptPoll poll(poll_signals);
            // Released while waiting: the physics thread may need the GIL to end (a Python
            // plugin's step, its exit); the interrupt poll re-takes it.
            return without_gil([&] { return env.wait(limit, on_main_thread ? &poll : nullptr); });
          },
          py::arg("timeout") = py::none(),
          "Wait until the physics thread has stopped (stop(), its steps run, a fault) or `timeout` "
          "seconds have passed; True once it has stopped. Ctrl-C raises KeyboardInterrupt.")
      .def("stop",
           // The physics thread may be waiting for the GIL in a Python callback.
           [](EnvCore& env) { without_gil([&] { env.stop(); }); })
      .def_property_readonly("running", &EnvCore::running)
      .def("hold_steps",  // waits for the step in progress
           [](EnvCore& env) { without_gil([&] { env.hold_steps(); }); })
      // resume notifies the physics thread; reset_plugins and notify_geometry_changed take the
      // bridge and host mutexes and call Python plugins, which re-take the GIL.
      .def("release_steps", [](EnvCore& env) { without_gil([&] { env.release_steps(); }); })
      // The re-entrancy checks of the Python façade (call_context.h builds the messages): each
      // named context in `refusals`, in order, refuses `what` where this thread is in it.
      .def(
          "check_call",
          [](const EnvCore& env, const std::string& what,
             const std::vector<std::string>& refusals) {
            for (const std::string& name : refusals) {
              env.check_call(what, call_context::refusal_named(name));
            }
          },
          py::arg("what"), py::arg("refusals"))
      // `with core.lifecycle("reset"):` marks this thread as inside the env's lifecycle
      // operation; check_call(..., ["lifecycle"]) refuses another one of the same env inside it.
      .def(
          "lifecycle",
          [](const py::object& self, const std::string& operation) {
            return LifecycleContext{self.cast<EnvCore*>(), operation, nullptr};
          },
          py::arg("operation"))
      .def("reset_plugins", [](EnvCore& env) { without_gil([&] { env.reset_plugins(); }); })
      .def(
          "notify_geometry_changed",
          [](EnvCore& env, int geom_id) {
            without_gil([&] { env.notify_geometry_changed(geom_id); });
          },
          py::arg("geom_id"))
      // Joins the physics thread, which may wait for the GIL in a Python callback.
      .def("close",
           [](EnvCore& env) {
             without_gil([&] { env.close(); });
             // CPython's type attribute cache keeps the str of each lookup it caches, in a slot
             // chosen by the str's address: a fresh str (a name built at run time, as mujoco's
             // model compilation, importlib.metadata and reprlib look attributes up) stays
             // there long after, holding down the pymalloc arena it sits in. Envs created
             // together left such strs in arenas full of their memory, so closing them all gave
             // back little (~90 KB per env kept, SPEC §18). Emptying the cache lets those arenas
             // go; it is cheap (4,096 slots, refilled on use) and an env's close is rare.
             PyType_ClearCache();
           })
      .def_property_readonly("model_generation",
                             [](const EnvCore& env) { return env.model_generation().value(); })
      .def_property_readonly("plugin_generation",
                             [](const EnvCore& env) { return env.plugin_generation().value(); })
      .def_property_readonly(
          "host", [](EnvCore& env) -> PluginHost& { return env.host(); },
          py::return_value_policy::reference_internal)
      // ---- Simulation control (SPEC §13) ----
      // pause_stepping waits for the step in progress; the others take the physics thread's mutex
      // only.
      .def("pause_stepping", &EnvCore::pause_stepping, py::call_guard<py::gil_scoped_release>())
      .def("resume_stepping", &EnvCore::resume_stepping, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("stepping_paused", &EnvCore::stepping_paused)
      .def_property_readonly("step_count", &EnvCore::step_count)
      .def("reset_step_count", &EnvCore::reset_step_count)
      .def(
          "set_realtime_factor",
          [](EnvCore& env, const py::object& realtime_factor) {
            const std::optional<double> factor = realtime_factor_of(realtime_factor);
            py::gil_scoped_release release;  // takes the physics thread's mutex (the lock order)
            env.set_realtime_factor(factor);
          },
          py::arg("realtime_factor"))
      .def_property_readonly("realtime_factor", &EnvCore::realtime_factor)
      .def("measured_realtime_factor", &EnvCore::measured_realtime_factor,
           py::call_guard<py::gil_scoped_release>())  // takes the statistics mutex
      .def(
          "reset_world",
          [](EnvCore& env, int keyframe, const py::object& qpos, const py::object& qvel,
             bool keep_time) {
            const EnvCore::ResetTarget target = reset_target_of(keyframe, qpos, qvel, keep_time);
            // reset_plugins calls Python plugins, which re-take the GIL; the caller holds the
            // steps, so no stepping thread waits for the GIL meanwhile.
            without_gil([&] { env.reset_world(target); });
          },
          py::arg("keyframe"), py::arg("qpos"), py::arg("qvel"), py::arg("keep_time"),
          "The world reset (EnvCore::reset_world), with the steps held by the caller.")
      .def(
          "set_reset_request_hooks",
          [](EnvCore& env, py::object resolve, py::object report) {
            const GilSafeObject resolver(std::move(resolve));
            const GilSafeObject reporter(std::move(report));
            // Both on the stepping thread at a step boundary, holding step_mutex_ (before the
            // GIL in the lock order) and no other lock.
            EnvCore::ResetRequestHooks hooks;
            hooks.resolve = [resolver](const std::optional<std::string>& keyframe)
                -> std::optional<EnvCore::ResetTarget> {
              py::gil_scoped_acquire gil;
              const py::object target =
                  resolver.get()(keyframe ? py::object(py::str(*keyframe)) : py::none());
              if (target.is_none()) return std::nullopt;
              const auto parts = target.cast<py::tuple>();
              return reset_target_of(parts[0].cast<int>(), parts[1], parts[2],
                                     parts[3].cast<bool>());
            };
            hooks.report = [reporter](const std::optional<std::string>& keyframe,
                                      const std::string& message) {
              py::gil_scoped_acquire gil;
              reporter.get()(keyframe ? py::object(py::str(*keyframe)) : py::none(), message);
            };
            env.set_reset_request_hooks(std::move(hooks));
          },
          py::arg("resolve"), py::arg("report"),
          "A plugin's reset request: resolve(keyframe | None) gives its target as reset_world's "
          "(keyframe, qpos, qvel, keep_time) or None; report(keyframe | None, message) a reset "
          "that failed. The core carries the reset out.")
      // ---- State (SPEC §20; mjfast.model.state builds the SimState) ----
      .def_property_readonly("state_size", &EnvCore::state_size)
      .def(
          "get_state",
          [](EnvCore& env) {
            EnvCore::StateHeader header;
            std::vector<PluginStateEntry> plugins;
            while (true) {
              py::array_t<double> physics(env.state_size());
              double* out = physics.mutable_data();
              const auto size = static_cast<std::size_t>(physics.size());
              // Waits for a step boundary; the physics thread may wait for the GIL meanwhile.
              if (!without_gil([&] { return env.get_state(out, size, header, &plugins); })) {
                continue;  // a reload changed the state's size in between
              }
              py::detail::array_proxy(physics.ptr())->flags &=
                  ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
              py::tuple entries(plugins.size());
              for (std::size_t i = 0; i < plugins.size(); ++i) {
                entries[i] = py::make_tuple(py::str(plugins[i].name), py::str(plugins[i].type),
                                            py::bytes(plugins[i].value));
              }
              return py::make_tuple(std::move(physics), header.step_count,
                                    py::str(header.model->signature),
                                    py::str(header.model->description), std::move(entries));
            }
          },
          "(physics, step_count, model_signature, model_description, plugins) at a step "
          "boundary: physics a read-only float64 array, plugins ((name, type, value), ...).")
      .def(
          "set_state",
          [](EnvCore& env,
             const py::array_t<double, py::array::c_style | py::array::forcecast>& physics,
             std::uint64_t step_count, const std::string& signature, const std::string& description,
             const py::iterable& plugins) {
            if (physics.ndim() != 1) {
              throw py::value_error("set_state(): physics must be one-dimensional, got " +
                                    std::to_string(physics.ndim()) + " dimensions");
            }
            std::vector<PluginStateEntry> entries;
            for (py::handle item : plugins) {
              const auto entry = item.cast<py::tuple>();
              entries.push_back({entry[0].cast<std::string>(), entry[1].cast<std::string>(),
                                 entry[2].cast<std::string>()});
            }
            const double* data = physics.data();
            const auto size = static_cast<std::size_t>(physics.size());
            // Waits for a step boundary; Python plugins' set_state re-take the GIL.
            without_gil(
                [&] { env.set_state(data, size, step_count, signature, description, entries); });
          },
          py::arg("physics"), py::arg("step_count"), py::arg("signature"), py::arg("description"),
          py::arg("plugins"))
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
