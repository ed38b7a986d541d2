// NativeHostServices: the host side of mjfast_host_api (plugin_abi.h) for one native plugin
// instance: opening cameras during its load() through a CameraOpener, and the C functions that
// forward the camera calls to CameraHandle, translating its exceptions into status codes; and the
// simulation requests, forwarded to the env that created the instance (SimulationRequests, found
// through its CreationScope when these services are built). It owns the C handles it gave out;
// where a camera's parameters come from is the opener's business.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "camera_handle.h"
#include "plugin_abi.h"
#include "sim_requests.h"

struct mjfast_camera;

namespace mjfast {

// Opens the model's camera `name` as the env does for a Python plugin; throws std::logic_error
// for a misuse, anything else for a failure (unknown name, parameters).
using CameraOpener = std::function<std::shared_ptr<CameraHandle>(const std::string& name)>;

class NativeHostServices {
 public:
  explicit NativeHostServices(CameraOpener opener)
      : opener_(std::move(opener)), requests_(SimulationRequests::current()) {}
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

 private:
  CameraOpener opener_;
  std::weak_ptr<SimulationRequests> requests_;
  bool loading_ = false;  // set and read on the thread running the instance's load()
  std::mutex cameras_mutex_;  // close may come from any thread the host dispatches on
  std::unordered_set<mjfast_camera*> cameras_;
};

}  // namespace mjfast
