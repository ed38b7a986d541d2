#include "native/native_host_services.h"

#include <cstdint>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "render/frame_store.h"

// The opaque C handles of plugin_abi.h.
struct mjfast_camera {
  mjfast::NativeHostServices* services;
  std::shared_ptr<mjfast::CameraHandle> handle;
};

struct mjfast_frame_lease {
  std::shared_ptr<const mjfast::Frame> frame;
};

namespace mjfast {
namespace {

static_assert(MJFAST_PLANE_RGB == static_cast<int>(Plane::kRgb));
static_assert(MJFAST_PLANE_DEPTH == static_cast<int>(Plane::kDepth));
static_assert(MJFAST_PLANE_SEGMENTATION == static_cast<int>(Plane::kSegmentation));

void set_error(mjfast_error* error, const char* message) {
  if (error == nullptr) return;
  std::strncpy(error->message, message, sizeof(error->message) - 1);
  error->message[sizeof(error->message) - 1] = '\0';
}

// Every C entry point: a C++ exception becomes its status code and message, never unwinds into
// the plugin (which may use another C++ runtime).
template <class Body>
int translated(mjfast_error* error, Body&& body) noexcept {
  try {
    body();
    return MJFAST_OK;
  } catch (const std::logic_error& e) {  // includes std::invalid_argument (a bad index)
    set_error(error, e.what());
    return MJFAST_LOGIC_ERROR;
  } catch (const std::exception& e) {
    set_error(error, e.what());
  } catch (...) {
    set_error(error, "unknown C++ exception");
  }
  return MJFAST_ERROR;
}

CameraHandle& handle_of(mjfast_camera* camera) {
  if (camera == nullptr) throw std::invalid_argument("camera is NULL");
  return *camera->handle;
}

Plane plane_of(int plane) {
  if (plane < 0 || plane >= static_cast<int>(kPlaneCount)) {
    throw std::invalid_argument("plane " + std::to_string(plane) +
                                " is not one of MJFAST_PLANE_RGB, _DEPTH, _SEGMENTATION");
  }
  return static_cast<Plane>(plane);
}

int open_camera(void* context, const char* name, mjfast_camera** out_camera, mjfast_error* error) {
  return translated(error, [&] {
    if (out_camera == nullptr) throw std::invalid_argument("out_camera is NULL");
    *out_camera = nullptr;
    *out_camera = static_cast<NativeHostServices*>(context)->open_camera(name ? name : "");
  });
}

void camera_close(mjfast_camera* camera) {
  if (camera != nullptr) camera->services->close_camera(camera);
}

int camera_set_geom_group(mjfast_camera* camera, int group, int enabled, mjfast_error* error) {
  return translated(error, [&] { handle_of(camera).set_geom_group(group, enabled != 0); });
}

int camera_set_visual_flag(mjfast_camera* camera, int flag, int enabled, mjfast_error* error) {
  return translated(error, [&] { handle_of(camera).set_visual_flag(flag, enabled != 0); });
}

int camera_enable_frames(mjfast_camera* camera, int history, mjfast_error* error) {
  return translated(error, [&] { handle_of(camera).enable_frames(history); });
}

int camera_geom_group_enabled(mjfast_camera* camera, int group, int* out, mjfast_error* error) {
  return translated(error, [&] { *out = handle_of(camera).geom_group_enabled(group) ? 1 : 0; });
}

int camera_visual_flag_enabled(mjfast_camera* camera, int flag, int* out, mjfast_error* error) {
  return translated(error, [&] { *out = handle_of(camera).visual_flag_enabled(flag) ? 1 : 0; });
}

int camera_plane_configured(mjfast_camera* camera, int plane, int* out, mjfast_error* error) {
  return translated(error,
                    [&] { *out = handle_of(camera).plane_configured(plane_of(plane)) ? 1 : 0; });
}

int camera_take_latest(mjfast_camera* camera, int plane, mjfast_frame_lease** out_lease,
                       mjfast_frame_view* out_view, mjfast_error* error) {
  return translated(error, [&] {
    if (out_lease == nullptr || out_view == nullptr) {
      throw std::invalid_argument("out_lease and out_view must not be NULL");
    }
    *out_lease = nullptr;
    std::shared_ptr<const Frame> frame = handle_of(camera).take_latest(plane_of(plane));
    if (!frame) return;
    *out_view = mjfast_frame_view{frame->bytes.data(),
                                  frame->bytes.size(),
                                  static_cast<int32_t>(frame->plane),
                                  frame->width,
                                  frame->height,
                                  frame->simulation_time_ns,
                                  frame->capture_id,
                                  frame->frame_generation.value()};
    *out_lease = new mjfast_frame_lease{std::move(frame)};
  });
}

void lease_release(mjfast_frame_lease* lease) { delete lease; }

int request_pause(void* context, mjfast_error* error) {
  return translated(error, [&] { static_cast<NativeHostServices*>(context)->request_pause(); });
}

int request_reset(void* context, const char* keyframe, mjfast_error* error) {
  return translated(error,
                    [&] { static_cast<NativeHostServices*>(context)->request_reset(keyframe); });
}

std::int64_t world_index(void* context) {
  return static_cast<NativeHostServices*>(context)->world_index();
}

int publish(void* context, const char* topic, const mjfast_message_field* fields, std::size_t count,
            mjfast_error* error) {
  return translated(
      error, [&] { static_cast<NativeHostServices*>(context)->publish(topic, fields, count); });
}

const mjfast_host_api kTable = {
    sizeof(mjfast_host_api),
    &open_camera,
    &camera_close,
    &camera_set_geom_group,
    &camera_set_visual_flag,
    &camera_enable_frames,
    &camera_geom_group_enabled,
    &camera_visual_flag_enabled,
    &camera_plane_configured,
    &camera_take_latest,
    &lease_release,
    &request_pause,
    &request_reset,
    &publish,
    &world_index,
};

}  // namespace

void check_message_fields(const mjfast_message_field* fields, std::size_t count) {
  if (count > 0 && fields == nullptr) throw std::invalid_argument("publish: fields is NULL");
  for (std::size_t i = 0; i < count; ++i) {
    const mjfast_message_field& field = fields[i];
    const std::string which = "publish: field " + std::to_string(i);
    if (field.key == nullptr) throw std::invalid_argument(which + " has a NULL key");
    const std::string named = which + " ('" + field.key + "')";
    if (field.type < MJFAST_FIELD_FLOAT64 || field.type > MJFAST_FIELD_STRING) {
      throw std::invalid_argument(named + " has type " + std::to_string(field.type) +
                                  ", not one of MJFAST_FIELD_*");
    }
    if (field.ndim < 0 || field.ndim > MJFAST_FIELD_MAX_DIMS) {
      throw std::invalid_argument(named + " has ndim " + std::to_string(field.ndim) +
                                  ", expected 0 (a scalar) to " +
                                  std::to_string(MJFAST_FIELD_MAX_DIMS));
    }
    if (field.type == MJFAST_FIELD_STRING && field.ndim != 0) {
      throw std::invalid_argument(named + " is a string with ndim " + std::to_string(field.ndim) +
                                  ", expected 0");
    }
    std::int64_t elements = 1;
    for (int axis = 0; axis < field.ndim; ++axis) {
      if (field.shape[axis] < 0 || field.shape[axis] > (std::int64_t{1} << 40)) {
        throw std::invalid_argument(named + " has shape[" + std::to_string(axis) +
                                    "] = " + std::to_string(field.shape[axis]) + ", out of range");
      }
      elements *= field.shape[axis];
      if (elements > (std::int64_t{1} << 40)) {
        throw std::invalid_argument(named + " has too many elements");
      }
    }
    if (field.data == nullptr && elements > 0) {
      throw std::invalid_argument(named + " has NULL data");
    }
  }
}

const mjfast_host_api* NativeHostServices::table() { return &kTable; }

NativeHostServices::~NativeHostServices() {
  for (mjfast_camera* camera : cameras_) delete camera;
}

mjfast_camera* NativeHostServices::open_camera(const std::string& name) {
  // Before anything else, and without the GIL: from a step callback, the same refusal as a
  // Python plugin gets (the opener would take the GIL on the physics thread).
  check_can_open_camera();
  if (!loading_) {
    throw std::logic_error(
        "open_offscreen_camera() called outside load(): a native plugin "
        "opens its cameras from load()");
  }
  if (!opener_) throw std::logic_error("this env provides no cameras to native plugins");
  std::shared_ptr<CameraHandle> handle = opener_(name);
  if (!handle) throw std::runtime_error("opening camera '" + name + "' returned no handle");
  auto* camera = new mjfast_camera{this, std::move(handle)};
  std::lock_guard<std::mutex> lock(cameras_mutex_);
  cameras_.insert(camera);
  return camera;
}

void NativeHostServices::close_camera(mjfast_camera* camera) {
  {
    std::lock_guard<std::mutex> lock(cameras_mutex_);
    if (cameras_.erase(camera) == 0) return;  // not one of ours, or closed already
  }
  delete camera;
}

void NativeHostServices::request_pause() {
  const auto env = requests_.lock();
  if (!env) throw std::logic_error("request_pause(): no env to ask (it was closed)");
  env->request_pause();
}

void NativeHostServices::request_reset(const char* keyframe) {
  const auto env = requests_.lock();
  if (!env) throw std::logic_error("request_reset(): no env to ask (it was closed)");
  env->request_reset(keyframe ? std::optional<std::string>(keyframe) : std::nullopt);
}

void NativeHostServices::publish(const char* topic, const mjfast_message_field* fields,
                                 std::size_t count) {
  if (topic == nullptr) throw std::invalid_argument("publish: topic is NULL");
  check_message_fields(fields, count);
  if (!publisher_) throw std::logic_error("publish(): this env provides no bus to native plugins");
  publisher_(topic, fields, count);
}

}  // namespace mjfast
