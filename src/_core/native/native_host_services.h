// NativeHostServices: the host side of mjfast_host_api (plugin_abi.h) for one native plugin
// instance: opening cameras during its load() through a CameraOpener, and the C functions that
// forward the camera calls to CameraHandle, translating its exceptions into status codes; and the
// simulation requests, forwarded to the env that created the instance (SimulationRequests, found
// through its CreationScope when these services are built); and publishing on the env's bus
// through a Publisher (the env's, in the plugin's node namespace). It owns the C handles it gave
// out; where a camera's parameters come from is the opener's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "common/sim_requests.h"
#include "plugin_abi.h"
#include "render/camera_handle.h"

struct mjfast_camera;

namespace mjfast {

// Opens the model's camera `name` as the env does for a Python plugin; throws std::logic_error
// for a misuse, anything else for a failure (unknown name, parameters).
using CameraOpener = std::function<std::shared_ptr<CameraHandle>(const std::string& name)>;

// Publishes a message on the env's bus in the plugin's node namespace; the fields were checked
// (types, shapes, keys) before it is called. Throws std::runtime_error for a failed publication.
using Publisher = std::function<void(const std::string& topic, const mjfast_message_field* fields,
                                     std::size_t count)>;

// Throws std::invalid_argument naming the first malformed field (type, ndim, shape, key, data).
void check_message_fields(const mjfast_message_field* fields, std::size_t count);

class NativeHostServices {
 public:
  explicit NativeHostServices(CameraOpener opener, Publisher publisher = {},
                              std::int64_t world_index = 0)
      : opener_(std::move(opener)),
        publisher_(std::move(publisher)),
        requests_(SimulationRequests::current()),
        world_index_(world_index) {}
  // Frees the cameras the plugin left open (it has been destroyed by now).
  ~NativeHostServices();
  NativeHostServices(const NativeHostServices&) = delete;
  NativeHostServices& operator=(const NativeHostServices&) = delete;

  static const mjfast_host_api* table();

  // While alive, the instance is in its load(): the only place open_camera is accepted.
  class LoadScope {
   public:
    explicit LoadScope(NativeHostServices& services) : services_(services) {
      services_.loading_ = true;
    }
    ~LoadScope() { services_.loading_ = false; }
    LoadScope(const LoadScope&) = delete;
    LoadScope& operator=(const LoadScope&) = delete;

   private:
    NativeHostServices& services_;
  };

  mjfast_camera* open_camera(const std::string& name);
  void close_camera(mjfast_camera* camera);
  // Throw std::logic_error when there is no env to ask (none created this instance, or it died).
  void request_pause();
  void request_reset(const char* keyframe);
  // std::logic_error for malformed fields or no publisher; the publisher's errors otherwise.
  void publish(const char* topic, const mjfast_message_field* fields, std::size_t count);
  // The instance's world in its VectorEnv (0 in a MujocoEnv).
  std::int64_t world_index() const { return world_index_; }

 private:
  CameraOpener opener_;
  Publisher publisher_;
  std::weak_ptr<SimulationRequests> requests_;
  std::int64_t world_index_;
  bool loading_ = false;  // set and read on the thread running the instance's load()
  // Close may come from any thread the host dispatches on. A leaf of the lock order (env_core.h).
  std::mutex cameras_mutex_;
  std::unordered_set<mjfast_camera*> cameras_;
};

}  // namespace mjfast
