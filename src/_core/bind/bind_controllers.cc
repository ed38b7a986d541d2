// Exposes the compiled per-step controllers of SPEC §23 (src/_core/control: JointTrajectoryCore,
// GripperCore) to their Python plugins, which own the goal bookkeeping: construction from the
// model addresses the plugin resolved, the hand-over of a goal, holds, and the copies and events
// the bookkeeping reads. A plugin sets one of these as its `__mjfast_native_control__`, and its
// adapter gives the host control() as a DirectCallback (python_plugin_adapter.cc). Every call
// that takes a controller's mutex (a leaf of the lock order, env/env_core.h) releases the GIL
// first, as the order wants of every lock.
#include <pybind11/numpy.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bind/bindings.h"
#include "control/gripper_core.h"
#include "control/joint_trajectory_core.h"
#include "control/native_control.h"

namespace mjfast {
namespace {

using Counts = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;

Counts as_tuple(const EventCounts& counts) {
  return {counts.feedback, counts.state, counts.outcome};
}

EventCounts wait_events(ControllerEvents& events, const Counts& seen, double timeout_s) {
  EventCounts counts{std::get<0>(seen), std::get<1>(seen), std::get<2>(seen)};
  // The stepping thread never waits for the GIL while it holds the controller's mutex; the
  // waiting here may be long, and the GIL is not held across it.
  return without_gil([&] { return events.wait(counts, timeout_s); });
}

py::array_t<double> array_of(const std::vector<double>& values) {
  py::array_t<double> array(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

CommandInterface command_interface(const std::string& name) {
  if (name == "position") return CommandInterface::kPosition;
  if (name == "velocity") return CommandInterface::kVelocity;
  if (name == "effort") return CommandInterface::kEffort;
  if (name == "position_velocity") return CommandInterface::kPositionVelocity;
  throw py::value_error(
      "command interface must be position, velocity, effort or "
      "position_velocity, got '" +
      name + "'");
}

std::vector<JointTolerance> tolerances(const std::vector<std::pair<double, double>>& values) {
  std::vector<JointTolerance> out;
  out.reserve(values.size());
  for (const auto& [position, velocity] : values) out.push_back({position, velocity});
  return out;
}

const char* outcome_name(GoalOutcome outcome) {
  switch (outcome) {
    case GoalOutcome::kSucceeded: return "succeeded";
    case GoalOutcome::kPathToleranceViolated: return "path_tolerance_violated";
    case GoalOutcome::kGoalToleranceViolated: return "goal_tolerance_violated";
    case GoalOutcome::kActive: break;
  }
  return "active";
}

py::dict snapshot_dict(const JointTrajectorySnapshot& snapshot) {
  py::dict out;
  out["time"] = snapshot.time;
  out["goal"] = snapshot.goal;
  out["desired_position"] = array_of(snapshot.desired_position);
  out["desired_velocity"] = array_of(snapshot.desired_velocity);
  out["desired_acceleration"] = array_of(snapshot.desired_acceleration);
  out["actual_position"] = array_of(snapshot.actual_position);
  out["actual_velocity"] = array_of(snapshot.actual_velocity);
  out["error_position"] = array_of(snapshot.error_position);
  out["error_velocity"] = array_of(snapshot.error_velocity);
  out["output"] = array_of(snapshot.output);
  return out;
}

py::dict gripper_state(const GripperState& state) {
  py::dict out;
  out["time"] = state.time;
  out["goal"] = state.goal;
  out["position"] = state.position;
  out["effort"] = state.effort;
  out["stalled"] = state.stalled;
  out["reached_goal"] = state.reached_goal;
  return out;
}

}  // namespace

void bind_controllers(py::module_& module) {
  py::class_<NativeControl>(
      module, "NativeControl",
      "A compiled per-step controller that a Python plugin owns; its adapter dispatches "
      "control() without entering Python.")
      .def(
          "control",
          [](NativeControl& self, std::uintptr_t model, std::uintptr_t data) {
            // The stepping thread's call, made by hand (a test, or a host without the direct
            // callback): the caller keeps model and data alive; no lock of 0-7 is waited for
            // with the GIL held except the controller's own leaf, released first.
            without_gil([&] {
              self.control(reinterpret_cast<const mjModel*>(model),
                           reinterpret_cast<mjData*>(data));
            });
          },
          py::arg("model_address"), py::arg("data_address"),
          "Runs one step's work on the mjModel*/mjData* at these addresses.");

  py::class_<JointTrajectoryCore, NativeControl>(
      module, "JointTrajectoryCore",
      "mjfast/JointTrajectoryController's per-step work (src/_core/control).")
      .def(py::init([](std::vector<int> qpos, std::vector<int> dof, std::vector<int> actuator,
                       std::vector<int> velocity_actuator, const std::string& command,
                       const std::vector<std::tuple<double, double, double, double>>& gains,
                       std::vector<double> ff_velocity_scale, bool open_loop, bool interpolate,
                       double state_period, double feedback_period) {
             JointTrajectoryLayout layout;
             layout.qpos = std::move(qpos);
             layout.dof = std::move(dof);
             layout.actuator = std::move(actuator);
             layout.velocity_actuator = std::move(velocity_actuator);
             layout.command = command_interface(command);
             for (const auto& [p, i, d, i_clamp] : gains)
               layout.gains.push_back({p, i, d, i_clamp});
             layout.ff_velocity_scale = std::move(ff_velocity_scale);
             layout.open_loop = open_loop;
             layout.interpolate = interpolate;
             layout.state_period = state_period;
             layout.feedback_period = feedback_period;
             return std::make_unique<JointTrajectoryCore>(std::move(layout));
           }),
           py::kw_only(), py::arg("qpos"), py::arg("dof"), py::arg("actuator"),
           py::arg("velocity_actuator"), py::arg("command"), py::arg("gains"),
           py::arg("ff_velocity_scale"), py::arg("open_loop"), py::arg("interpolate"),
           py::arg("state_period"), py::arg("feedback_period"))
      .def(
          "set_trajectory",
          [](JointTrajectoryCore& self, std::uint64_t goal, double start, std::vector<double> times,
             std::vector<double> positions, std::vector<double> velocities,
             std::vector<double> accelerations, const std::vector<std::pair<double, double>>& path,
             const std::vector<std::pair<double, double>>& goal_tolerance, double goal_time) {
            without_gil([&] {
              self.set_trajectory(goal, start, std::move(times), std::move(positions),
                                  std::move(velocities), std::move(accelerations), tolerances(path),
                                  tolerances(goal_tolerance), goal_time);
            });
          },
          py::arg("goal"), py::arg("start"), py::arg("times"), py::arg("positions"),
          py::arg("velocities"), py::arg("accelerations"), py::arg("path_tolerance"),
          py::arg("goal_tolerance"), py::arg("goal_time"))
      .def("hold", [](JointTrajectoryCore& self) { without_gil([&] { self.hold(); }); })
      .def(
          "wait",
          [](JointTrajectoryCore& self, const Counts& seen, double timeout_s) {
            return as_tuple(wait_events(self.events(), seen, timeout_s));
          },
          py::arg("seen"), py::arg("timeout_s"),
          "Until the outcome count differs from `seen`'s (a goal ended), close(), or the "
          "timeout passes: the (feedback, state, outcome) counts.")
      .def("close", [](JointTrajectoryCore& self) { without_gil([&] { self.events().close(); }); })
      .def(
          "snapshot",
          [](JointTrajectoryCore& self) {
            JointTrajectorySnapshot snapshot;
            without_gil([&] { self.snapshot(snapshot); });
            return snapshot_dict(snapshot);
          },
          "The state as of the latest state copy (state_publish_rate, and a goal's end).")
      .def(
          "feedback",
          [](JointTrajectoryCore& self) {
            JointTrajectorySnapshot snapshot;
            without_gil([&] { self.feedback(snapshot); });
            return snapshot_dict(snapshot);
          },
          "The state as of the latest feedback (action_monitor_rate).")
      .def("last_end", [](JointTrajectoryCore& self) {
        const GoalEnd end = without_gil([&] { return self.last_end(); });
        py::dict out;
        out["goal"] = end.goal;
        out["outcome"] = outcome_name(end.outcome);
        out["joint"] = end.joint;
        out["error"] = end.error;
        out["velocity"] = end.velocity;
        out["time"] = end.time;
        return out;
      });

  py::class_<GripperCore, NativeControl>(
      module, "GripperCore", "mjfast/GripperActionController's per-step work (src/_core/control).")
      .def(
          py::init([](int qpos, int dof, int actuator, double gain,
                      std::tuple<double, double, double> bias, double goal_tolerance,
                      double stall_velocity_threshold, double stall_timeout, double feedback_period,
                      bool effort, std::tuple<double, double, double, double> gains) {
            GripperLayout layout;
            layout.qpos = qpos;
            layout.dof = dof;
            layout.actuator = actuator;
            layout.gain = gain;
            layout.bias[0] = std::get<0>(bias);
            layout.bias[1] = std::get<1>(bias);
            layout.bias[2] = std::get<2>(bias);
            layout.goal_tolerance = goal_tolerance;
            layout.stall_velocity_threshold = stall_velocity_threshold;
            layout.stall_timeout = stall_timeout;
            layout.feedback_period = feedback_period;
            layout.effort = effort;
            const auto& [p, i, d, i_clamp] = gains;
            layout.gains = {p, i, d, i_clamp};
            return std::make_unique<GripperCore>(layout);
          }),
          py::kw_only(), py::arg("qpos"), py::arg("dof"), py::arg("actuator"), py::arg("gain"),
          py::arg("bias"), py::arg("goal_tolerance"), py::arg("stall_velocity_threshold"),
          py::arg("stall_timeout"), py::arg("feedback_period"), py::arg("effort") = false,
          py::arg("gains") = std::make_tuple(0.0, 0.0, 0.0, 0.0),
          "`effort`: the effort command interface (a Pid with `gains` (p, i, d, i_clamp) on "
          "the position error, its force clamped to max_effort), else the position one.")
      .def(
          "command",
          [](GripperCore& self, std::uint64_t goal, double position, double max_effort) {
            without_gil([&] { self.command(goal, position, max_effort); });
          },
          py::arg("goal"), py::arg("position"), py::arg("max_effort"))
      .def("hold", [](GripperCore& self) { without_gil([&] { self.hold(); }); })
      .def(
          "wait",
          [](GripperCore& self, const Counts& seen, double timeout_s) {
            return as_tuple(wait_events(self.events(), seen, timeout_s));
          },
          py::arg("seen"), py::arg("timeout_s"))
      .def("close", [](GripperCore& self) { without_gil([&] { self.events().close(); }); })
      .def("feedback",
           [](GripperCore& self) {
             return gripper_state(without_gil([&] { return self.feedback(); }));
           })
      .def("last_end", [](GripperCore& self) {
        return gripper_state(without_gil([&] { return self.last_end(); }));
      });
}

}  // namespace mjfast
