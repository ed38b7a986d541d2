// StepRecorder (step_recorder.h) for mjfast.recording: attached to an EnvCore, drained by the
// recording's writer thread.
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include "bind/bindings.h"
#include "control/control_bridge.h"
#include "env/env_core.h"
#include "record/step_recorder.h"

namespace mjfast {

namespace {

// The writer thread's side: the entries of the last drain, whose buffers are reused. One drain()
// at a time (drain_mutex, env_core.h's 6a, taken with the GIL released): `drained` is its
// scratch space until it returns, which a second drainer would refill under the first one's
// reading.
struct DrainingRecorder {
  std::shared_ptr<StepRecorder> recorder;
  std::vector<StepRecorder::Entry> drained;
  std::unique_ptr<std::mutex> drain_mutex = std::make_unique<std::mutex>();
};

}  // namespace

void bind_recorder(py::module_& module) {
  py::class_<DrainingRecorder>(module, "StepRecorder")
      .def(py::init([](std::size_t capacity, std::uint64_t state_every, double state_period,
                       bool replaying, bool wait_when_full) {
             return DrainingRecorder{
                 std::make_shared<StepRecorder>(capacity, state_every, state_period, replaying,
                                                wait_when_full),
                 {}};
           }),
           py::arg("capacity"), py::arg("state_every"), py::arg("state_period"),
           py::arg("replaying") = false, py::arg("wait_when_full") = false)
      .def(
          "attach",
          [](DrainingRecorder& self, EnvCore& env) {
            // pause() waits for a step boundary, where the physics thread may want the GIL.
            py::gil_scoped_release release;
            env.set_step_recorder(self.recorder);
          },
          py::arg("env_core"))
      .def_static(
          "detach",
          [](EnvCore& env) {
            py::gil_scoped_release release;  // as attach
            env.set_step_recorder(nullptr);
          },
          py::arg("env_core"))
      .def_property_readonly("steps",
                             [](const DrainingRecorder& self) { return self.recorder->steps(); })
      .def_property_readonly("dropped",
                             [](const DrainingRecorder& self) { return self.recorder->dropped(); })
      .def_property_readonly("waits",
                             [](const DrainingRecorder& self) { return self.recorder->waits(); })
      .def(
          "close", [](DrainingRecorder& self) { self.recorder->close(); },
          "A stepping thread waiting for room goes on (its entry dropped): the writer drains no "
          "more.")
      .def(
          "drain",
          [](DrainingRecorder& self) {
            std::size_t count = 0;
            std::unique_lock<std::mutex> draining(*self.drain_mutex, std::defer_lock);
            {
              py::gil_scoped_release release;  // the ring's leaf lock: no GIL held waiting on it
              draining.lock();
              count = self.recorder->drain(self.drained);
            }
            py::list out;
            for (std::size_t i = 0; i < count; ++i) {
              const StepRecorder::Entry& entry = self.drained[i];
              const auto* raw = reinterpret_cast<const char*>(entry.values.data());
              py::object values;
              if (entry.kind == StepRecorder::Kind::kState) {
                // The raw float64 values (numpy.frombuffer reads them without a copy).
                values = py::bytes(raw, entry.values.size() * sizeof(double));
              } else {
                // {field name: its float64 values}, named by the control bridge's one table.
                py::dict fields;
                std::size_t offset = 0;
                for (std::size_t f = 0; f < kCommandFieldCount; ++f) {
                  if (!(entry.fields & (1u << f))) continue;
                  const std::size_t size = entry.field_sizes[f];
                  fields[kCommandFields[f].name] =
                      py::bytes(raw + offset * sizeof(double), size * sizeof(double));
                  offset += size;
                }
                values = std::move(fields);
              }
              out.append(py::make_tuple(
                  entry.kind == StepRecorder::Kind::kState ? "state" : "commands", entry.step,
                  entry.step_count, entry.model_generation, entry.time, entry.fields, values));
            }
            return out;
          },
          "[(kind 'state'|'commands', step, step_count, model_generation, time, fields, "
          "values)] waiting since the last drain, oldest first: a state's values as float64 "
          "bytes, commands' as {field: float64 bytes}");
}

}  // namespace mjfast
