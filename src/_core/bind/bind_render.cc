// Exposes the env's RenderCore (EnvCore owns it: EnvCore.render_core), the camera handle and
// frame leases to Python (mjfast.camera wraps them): plane names, configs from dicts, frames as
// read-only numpy views that keep their frame alive, and the Python scene provider that lets
// render_callback receive a mujoco.MjvScene.
#include <pybind11/numpy.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>

#include "bind/bindings.h"
#include "bind/python_scene_registry.h"
#include "env/env_core.h"
#include "render/camera_handle.h"
#include "render/render_core.h"

namespace mjfast {
namespace {

// Leaked on purpose: entries may be released during interpreter shutdown. Touched with the GIL.
std::unordered_map<const mjvScene*, py::object>& scene_registry() {
  static auto* registry = new std::unordered_map<const mjvScene*, py::object>();
  return *registry;
}

// Makes each snapshot scene as a mujoco.MjvScene, so Python plugins can be handed the object.
class PythonSceneProvider final : public SceneProvider {
 public:
  void set_model(py::object model) { model_ = GilSafeObject(std::move(model)); }

  mjvScene* make(const mjModel*, int max_geom) override {
    py::gil_scoped_acquire gil;  // called with no RenderCore lock held (SceneProvider contract)
    mjvScene* raw = register_python_scene(
        py::module_::import("mujoco").attr("MjvScene")(model_.get(), max_geom));
    if (raw->maxgeom != max_geom) {
      unregister_python_scene(raw);
      throw std::runtime_error("mujoco.MjvScene layout is not the one mjfast was built against");
    }
    return raw;
  }

  void release(mjvScene* scene) override {
    py::gil_scoped_acquire gil;  // SceneProvider contract: called with no RenderCore lock held
    unregister_python_scene(scene);
  }

 private:
  GilSafeObject model_;  // dropped with the GIL, on whatever thread drops the provider
};

struct FrameLease {
  std::shared_ptr<const Frame> frame;
  py::object array;  // made on first access of `data`
  Plane plane;
  int width;
  int height;
  std::int64_t simulation_time_ns;
  std::uint64_t capture_id;
  std::uint64_t frame_generation;

  explicit FrameLease(std::shared_ptr<const Frame> leased)
      : frame(std::move(leased)),
        plane(frame->plane),
        width(frame->width),
        height(frame->height),
        simulation_time_ns(frame->simulation_time_ns),
        capture_id(frame->capture_id),
        frame_generation(frame->frame_generation.value()) {}

  py::object data() {
    if (!frame) throw std::logic_error("FrameLease.data used after release()");
    if (array) return array;
    // The array's base holds its own reference to the frame: the pixels stay valid (and the
    // store never reuses them) for as long as any view of them exists.
    auto* keep = new std::shared_ptr<const Frame>(frame);
    py::capsule base(
        keep, [](void* pointer) { delete static_cast<std::shared_ptr<const Frame>*>(pointer); });
    const auto h = static_cast<py::ssize_t>(height);
    const auto w = static_cast<py::ssize_t>(width);
    void* pixels = const_cast<unsigned char*>(frame->bytes.data());
    py::array view;
    switch (plane) {
      case Plane::kRgb:
        view = py::array(py::dtype::of<std::uint8_t>(), {h, w, py::ssize_t{3}}, pixels, base);
        break;
      case Plane::kDepth: view = py::array(py::dtype::of<float>(), {h, w}, pixels, base); break;
      case Plane::kSegmentation:
        view = py::array(py::dtype::of<std::int32_t>(), {h, w, py::ssize_t{2}}, pixels, base);
        break;
    }
    py::detail::array_proxy(view.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
    array = view;
    return array;
  }

  void release() {
    frame.reset();
    array = py::object();
  }
};

py::object lease_or_none(std::shared_ptr<const Frame> frame) {
  if (!frame) return py::none();
  return py::cast(FrameLease(std::move(frame)));
}

Plane plane_of(const std::string& name) { return parse_plane(name.c_str()); }

int visual_flag_of(const py::handle& flag) {
  return py::int_(py::reinterpret_borrow<py::object>(flag));
}

// THE camera parameters (`<namespace>/cameras/<name>/<key>`), exported as _core.CAMERA_KEYS:
// mjfast.camera checks a dict of exactly these and fills in their defaults, config_of reads it.
enum CameraKey : std::size_t { kWidth, kHeight, kPlanes, kRateHz, kMaxGeom, kCameraKeyCount };
constexpr const char* kCameraKeys[kCameraKeyCount] = {"width", "height", "planes", "rate_hz",
                                                      "max_geom"};

CameraConfig config_of(const py::dict& values) {
  CameraConfig config;
  config.width = values[kCameraKeys[kWidth]].cast<int>();
  config.height = values[kCameraKeys[kHeight]].cast<int>();
  config.rate_hz = values[kCameraKeys[kRateHz]].cast<double>();
  config.max_geom = values[kCameraKeys[kMaxGeom]].cast<int>();
  config.planes = {false, false, false};
  for (py::handle plane : values[kCameraKeys[kPlanes]]) {
    config.planes[static_cast<std::size_t>(plane_of(plane.cast<std::string>()))] = true;
  }
  return config;
}

py::dict statistics_dict(const CameraStatistics& stats) {
  py::dict result;
  result["captures"] = stats.captures;
  result["capture_drops"] = stats.capture_drops;
  result["frames_rendered"] = stats.frames_rendered;
  result["frames_dropped"] = stats.frames_dropped;
  return result;
}

}  // namespace

mjvScene* register_python_scene(py::object scene) {
  // mujoco.MjvScene does not expose its address, but its `flags` array views the struct's own
  // field: step back by the field's offset.
  const auto flags_address = scene.attr(interned("flags"))
                                 .attr(interned("ctypes"))
                                 .attr(interned("data"))
                                 .cast<std::uintptr_t>();
  auto* raw = reinterpret_cast<mjvScene*>(flags_address - offsetof(mjvScene, flags));
  if (raw->maxgeom != scene.attr(interned("maxgeom")).cast<int>()) {
    throw std::runtime_error("mujoco.MjvScene layout is not the one mjfast was built against");
  }
  scene_registry()[raw] = std::move(scene);
  return raw;
}

void unregister_python_scene(const mjvScene* scene) { scene_registry().erase(scene); }

py::object python_scene_for(const mjvScene* scene) {
  auto& registry = scene_registry();
  auto found = registry.find(scene);
  return found == registry.end() ? py::none() : found->second;
}

std::unique_ptr<SceneProvider> python_scene_provider() {
  return std::make_unique<PythonSceneProvider>();
}

// A C++ table of names as a Python tuple of str.
template <std::size_t N>
static py::tuple names_tuple(const char* const (&names)[N]) {
  py::tuple result(N);
  for (std::size_t i = 0; i < N; ++i) result[i] = py::str(names[i]);
  return result;
}

void bind_render(py::module_& module) {
  module.attr("PLANES") = names_tuple(kPlaneNames);
  module.attr("CAMERA_KEYS") = names_tuple(kCameraKeys);
  py::class_<FrameLease>(module, "FrameLease",
                         "A leased frame: never overwritten or freed while leased.")
      .def_property_readonly("plane", [](const FrameLease& l) { return plane_name(l.plane); })
      .def_property_readonly("data", &FrameLease::data,
                             "Read-only numpy view of the pixels (no copy).")
      .def_readonly("simulation_time_ns", &FrameLease::simulation_time_ns)
      .def_readonly("capture_id", &FrameLease::capture_id)
      .def_readonly("width", &FrameLease::width)
      .def_readonly("height", &FrameLease::height)
      .def_readonly("frame_generation", &FrameLease::frame_generation)
      .def_property_readonly("released", [](const FrameLease& l) { return !l.frame; })
      .def("release", &FrameLease::release)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](FrameLease& l, const py::args&) { l.release(); })
      .def("__repr__", [](const FrameLease& l) {
        return "<FrameLease " + std::string(plane_name(l.plane)) + " " + std::to_string(l.width) +
               "x" + std::to_string(l.height) + " capture " + std::to_string(l.capture_id) +
               " t=" + std::to_string(l.simulation_time_ns) + "ns" + (l.frame ? "" : " released") +
               ">";
      });

  // The handle's methods take only its own short-lived mutexes, which no thread holds while
  // waiting for the GIL: they keep the GIL.
  py::class_<CameraHandle, std::shared_ptr<CameraHandle>>(module, "OffscreenCamera")
      .def_property_readonly("name", &CameraHandle::name)
      .def("set_geom_group", &CameraHandle::set_geom_group, py::arg("group"), py::arg("enabled"))
      .def(
          "set_visual_flag",
          [](CameraHandle& c, const py::object& flag, bool enabled) {
            c.set_visual_flag(visual_flag_of(flag), enabled);
          },
          py::arg("flag"), py::arg("enabled"))
      .def("enable_frames", &CameraHandle::enable_frames, py::arg("history") = 1)
      .def("request_frame", &CameraHandle::request_frame)
      .def("geom_group_enabled", &CameraHandle::geom_group_enabled, py::arg("group"))
      .def(
          "visual_flag_enabled",
          [](const CameraHandle& c, const py::object& flag) {
            return c.visual_flag_enabled(visual_flag_of(flag));
          },
          py::arg("flag"))
      .def(
          "take_latest",
          [](CameraHandle& c, const std::string& plane) {
            return lease_or_none(c.take_latest(plane_of(plane)));
          },
          py::arg("plane") = "rgb")
      .def(
          "take_recent",
          [](CameraHandle& c, const std::string& plane, int n) {
            py::list leases;
            for (auto& frame : c.take_recent(plane_of(plane), n)) {
              leases.append(lease_or_none(std::move(frame)));
            }
            return leases;
          },
          py::arg("plane"), py::arg("n"))
      .def(
          "plane_configured",
          [](const CameraHandle& c, const std::string& plane) {
            return c.plane_configured(plane_of(plane));
          },
          py::arg("plane"))
      .def_property_readonly("width", [](const CameraHandle& c) { return c.config().width; })
      .def_property_readonly("height", [](const CameraHandle& c) { return c.config().height; })
      .def_property_readonly("rate_hz", [](const CameraHandle& c) { return c.config().rate_hz; })
      .def_property_readonly("state",
                             [](const CameraHandle& c) {
                               switch (c.state()) {
                                 case CameraHandle::State::kPending: return "pending";
                                 case CameraHandle::State::kLive: return "live";
                                 case CameraHandle::State::kRetiring: return "retiring";
                                 case CameraHandle::State::kMissing: return "missing";
                                 case CameraHandle::State::kClosed: return "closed";
                               }
                               return "?";
                             })
      .def("statistics", [](const CameraHandle& c) { return statistics_dict(c.statistics()); })
      .def("__repr__",
           [](const CameraHandle& c) { return "<OffscreenCamera '" + c.name() + "'>"; });

  // No constructor: EnvCore makes and owns it (with python_scene_provider(), bind_env.cc).
  py::class_<RenderCore>(module, "RenderCore")
      .def(
          "begin_load",
          [](RenderCore& core, py::object model, std::uintptr_t model_address,
             std::uint64_t model_generation) {
            // Only open/bind/retire/close call the provider, all on this caller's thread.
            static_cast<PythonSceneProvider&>(core.scene_provider()).set_model(model);
            py::gil_scoped_release release;  // takes bound_mutex_ (see render_core.h)
            core.begin_load(reinterpret_cast<const mjModel*>(model_address),
                            ModelGeneration(model_generation));
          },
          py::arg("model"), py::arg("model_address"), py::arg("model_generation"))
      .def("pending_names", &RenderCore::pending_names,
           py::call_guard<py::gil_scoped_release>())  // takes bound_mutex_
      .def("live_names", &RenderCore::live_names,
           py::call_guard<py::gil_scoped_release>())  // takes bound_mutex_
      .def(
          "bind",
          [](RenderCore& core, const py::dict& configs) {
            std::map<std::string, CameraConfig> parsed;
            for (auto item : configs) {
              parsed[item.first.cast<std::string>()] = config_of(item.second.cast<py::dict>());
            }
            py::gil_scoped_release release;  // takes bound_mutex_; scenes re-take the GIL
            return core.bind(parsed);
          },
          py::arg("configs"))
      .def(
          "open",
          [](RenderCore& core, const std::string& name, const py::dict& config) {
            const CameraConfig parsed = config_of(config);
            py::gil_scoped_release release;  // takes bound_mutex_; scenes re-take the GIL
            return core.open(name, parsed);
          },
          py::arg("name"), py::arg("config"))
      // Waits for the turn in flight; the render thread never takes the GIL.
      .def("retire", &RenderCore::retire, py::call_guard<py::gil_scoped_release>())
      .def("close", &RenderCore::close, py::call_guard<py::gil_scoped_release>())
      .def("_set_render_hold", &RenderCore::set_render_hold, py::arg("held"),
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("render_sync", &RenderCore::render_sync)
      .def("check_can_open",
           [](const RenderCore& core) {
             check_can_open_camera();
             core.check_can_wait("open_offscreen_camera()");
           })
      .def("statistics", [](const RenderCore& core) {
        // Takes only stats_mutex_, which no thread holds while waiting: keeps the GIL. Callable
        // from a render_callback and inside an acquire_plugin block (render_core.h).
        const RenderStatistics stats = core.statistics();
        py::dict result;
        result["captures"] = stats.captures;
        result["capture_drops"] = stats.capture_drops;
        result["turns"] = stats.turns;
        result["stale_turns"] = stats.stale_turns;
        result["frames_rendered"] = stats.frames_rendered;
        result["frames_dropped"] = stats.frames_dropped;
        result["mean_turn_ns"] = mean_or_zero(stats.render_wall_ns, stats.turns);
        result["backend"] = stats.backend;
        result["render_errors"] = stats.render_errors;
        result["render_error"] = stats.render_error;
        return result;
      });

  // The env's own RenderCore; the reference keeps the EnvCore (its owner) alive.
  py::class_<EnvCore, std::shared_ptr<EnvCore>>(module.attr("EnvCore"))
      .def_property_readonly("render_core", &EnvCore::render_core,
                             py::return_value_policy::reference_internal);
}

}  // namespace mjfast
