// Exposes VectorCore to the Python VectorEnv façade: the worlds' cores handed over, stepping on
// the pool with the GIL released, the gathered arrays, holding the vector for a world operation.
#include <pybind11/numpy.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bind/bindings.h"
#include "vector/vector_core.h"

namespace mjfast {
namespace {

// Each worker stays attached to Python for its whole life, so that a Python plugin's callback only
// swaps the GIL instead of creating and destroying a thread state every call.
thread_local PyGILState_STATE worker_gil_state;
thread_local PyThreadState* worker_thread_state = nullptr;

WorkerPool::ThreadHooks python_attached_workers() {
  WorkerPool::ThreadHooks hooks;
  hooks.on_start = [] {
    worker_gil_state = PyGILState_Ensure();  // the pool's creator holds no lock a worker needs
    worker_thread_state = PyEval_SaveThread();
  };
  hooks.on_exit = [] {
    PyEval_RestoreThread(worker_thread_state);  // close() joins with the GIL released
    PyGILState_Release(worker_gil_state);
  };
  return hooks;
}

VectorCore::Field field_of(const std::string& name) {
  if (name == "qpos") return VectorCore::Field::kQpos;
  if (name == "qvel") return VectorCore::Field::kQvel;
  if (name == "ctrl") return VectorCore::Field::kCtrl;
  if (name == "sensordata") return VectorCore::Field::kSensordata;
  if (name == "time") return VectorCore::Field::kTime;
  throw py::key_error("no batched field '" + name +
                      "' (qpos, qvel, ctrl, sensordata and time are gathered)");
}

// Python delivers signals to its main thread only: a step() called there polls for them.
std::exception_ptr poll_signals() {
  py::gil_scoped_acquire gil;  // the waiting caller holds only the vector's and the pool's locks
  if (PyErr_CheckSignals() == 0) return nullptr;
  return std::make_exception_ptr(py::error_already_set());
}

// What `with core.hold(what):` holds: the vector's lock, for a world operation of the façade.
class VectorHold {
 public:
  VectorHold(std::shared_ptr<VectorCore> core, std::string what)
      : core_(std::move(core)), what_(std::move(what)) {}
  void enter() {
    if (held_.owns_lock()) throw std::logic_error("VectorEnv hold entered twice");
    // Waits for a step in progress, whose workers may need the GIL.
    held_ = without_gil([&] { return core_->hold(what_.c_str()); });
  }
  void exit() {
    if (held_.owns_lock()) held_.unlock();
  }

 private:
  std::shared_ptr<VectorCore> core_;
  std::string what_;
  std::unique_lock<std::mutex> held_;
};

}  // namespace

void bind_vector_env(py::module_& module) {
  const unsigned long main_thread_ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();

  py::class_<VectorHold>(module, "VectorHold")
      .def("__enter__", [](VectorHold& hold) { hold.enter(); })
      .def("__exit__", [](VectorHold& hold, const py::args&) { hold.exit(); });

  py::class_<VectorCore, std::shared_ptr<VectorCore>>(module, "VectorCore")
      .def(py::init([](const std::vector<std::shared_ptr<EnvCore>>& worlds, int threads) {
             std::shared_ptr<VectorCore> core(
                 new VectorCore(worlds, threads, python_attached_workers()),
                 [](VectorCore* doomed) {
                   // The last reference may go in Python's dealloc, with the GIL held: closing
                   // joins the workers, which take the GIL to detach.
                   if (Py_IsInitialized() && PyGILState_Check()) {
                     py::gil_scoped_release release;
                     delete doomed;
                   } else {
                     delete doomed;
                   }
                 });
             return core;
           }),
           py::arg("worlds"), py::arg("threads"),
           "Own `threads` worker threads that step the bound EnvCores `worlds`.")
      .def_property_readonly("num_worlds", &VectorCore::num_worlds)
      .def_property_readonly("threads", &VectorCore::threads)
      .def_property_readonly("closed", &VectorCore::closed)
      .def(
          "step",
          [main_thread_ident](VectorCore& core, const py::object& count, const py::object& ctrl) {
            const std::int64_t n = step_count_of(count);
            py::array_t<double, py::array::c_style> rows;
            const double* ctrl_data = nullptr;
            std::size_t ctrl_width = 0;
            if (!ctrl.is_none()) {
              // The façade checked dtype and values; this is the last line against a bad buffer.
              rows = py::array_t<double, py::array::c_style>::ensure(ctrl);
              const auto expected_rows = static_cast<py::ssize_t>(core.num_worlds());
              const auto expected_cols =
                  static_cast<py::ssize_t>(core.width(VectorCore::Field::kCtrl));
              if (!rows || rows.ndim() != 2 || rows.shape(0) != expected_rows ||
                  rows.shape(1) != expected_cols) {
                throw py::value_error("ctrl must be a float64 array of shape (" +
                                      std::to_string(expected_rows) + ", " +
                                      std::to_string(expected_cols) + ")");
              }
              ctrl_data = rows.data();
              ctrl_width = static_cast<std::size_t>(expected_cols);  // checked again under lock
            }
            const bool on_main_thread = PyThread_get_thread_ident() == main_thread_ident;
            const EnvCore::InterruptPoll poll(poll_signals);
            // Released for the whole call: the workers step with no Python but the Python
            // plugins' callbacks (each re-takes it), and `rows` is not freed before we return.
            without_gil(
                [&] { core.step(n, ctrl_data, ctrl_width, on_main_thread ? &poll : nullptr); });
          },
          py::arg("n") = 1, py::arg("ctrl") = py::none(),
          "Write ctrl (num_worlds x nu) into every world, then step every world n steps on the "
          "pool; the first failed world's error is raised after all have returned.")
      .def("failed_worlds", &VectorCore::failed_worlds,
           "The worlds whose last step raised, in index order.")
      .def(
          "gather",
          [](VectorCore& core, const std::string& name) {
            const VectorCore::Field field = field_of(name);
            const auto rows = static_cast<py::ssize_t>(core.num_worlds());
            const auto width = static_cast<py::ssize_t>(core.width(field));
            py::array_t<double> out = field == VectorCore::Field::kTime
                                          ? py::array_t<double>({rows})
                                          : py::array_t<double>({rows, width});
            double* target = out.mutable_data();
            // Waits for a step in progress, whose workers may need the GIL; `out` is ours alone.
            // A spawn in a world since `width` was read is refused under the vector's lock.
            without_gil(
                [&] { core.gather_rows(&field, 1, target, static_cast<std::size_t>(width)); });
            return out;
          },
          py::arg("field"), "A new (num_worlds, width) float64 array of `field` of every world.")
      .def(
          "gather_rows",
          [](VectorCore& core, const std::vector<std::string>& names, const py::object& out) {
            if (names.empty() || names.size() > 8) {
              throw py::value_error("gather_rows takes 1 to 8 fields, got " +
                                    std::to_string(names.size()));
            }
            VectorCore::Field fields[8];
            py::ssize_t width = 0;
            for (std::size_t i = 0; i < names.size(); ++i) {
              fields[i] = field_of(names[i]);
              width += static_cast<py::ssize_t>(core.width(fields[i]));
            }
            const auto rows = static_cast<py::ssize_t>(core.num_worlds());
            py::array_t<double, py::array::c_style> target;
            if (out.is_none()) {
              target = py::array_t<double, py::array::c_style>({rows, width});
            } else {
              // Only a writable C-contiguous float64 array of the right shape is filled in place.
              if (!py::isinstance<py::array_t<double, py::array::c_style>>(out)) {
                throw py::type_error("out must be a C-contiguous float64 numpy array");
              }
              target = out.cast<py::array_t<double, py::array::c_style>>();
              if (target.ndim() != 2 || target.shape(0) != rows || target.shape(1) != width ||
                  !target.writeable()) {
                throw py::value_error("out must be a writable float64 array of shape (" +
                                      std::to_string(rows) + ", " + std::to_string(width) + ")");
              }
            }
            double* data = target.mutable_data();
            // Waits for a step in progress, whose workers may need the GIL; `target` is kept
            // alive by this frame.
            without_gil([&] {
              core.gather_rows(fields, names.size(), data, static_cast<std::size_t>(width));
            });
            return target;
          },
          py::arg("fields"), py::arg("out") = py::none(),
          "Every world's `fields` side by side, one row per world: into `out` (a (num_worlds, "
          "total width) float64 array, filled in place), or a new array.")
      .def(
          "hold",
          [](const std::shared_ptr<VectorCore>& core, std::string what) {
            return VectorHold(core, std::move(what));
          },
          py::arg("what"), "A context manager holding the vector (no step runs meanwhile).")
      // Joins the workers, which take the GIL to detach.
      .def("close", [](VectorCore& core) { without_gil([&] { core.close(); }); });
}

}  // namespace mjfast
