// RenderCore's lifetime and figures: construction with MuJoCo's own scene provider, the
// destructor's close, statistics(). The rest of the class lives by concept (render_core.h):
// render_binding.cc (cameras bound to a model generation, retired at reload and close),
// render_capture.cc (the schedule and the step-end capture on the physics thread) and
// render_thread.cc (the render thread and its GL passes).
#include "render/render_core.h"

#include <memory>
#include <mutex>
#include <utility>

#include "render/gl_context.h"

namespace mjfast {
namespace {

class NativeSceneProvider final : public SceneProvider {
 public:
  mjvScene* make(const mjModel* model, int max_geom) override {
    auto* scene = new mjvScene;
    mjv_defaultScene(scene);
    mjv_makeScene(model, scene, max_geom);
    return scene;
  }
  void release(mjvScene* scene) override {
    mjv_freeScene(scene);
    delete scene;
  }
};

}  // namespace

RenderCore::RenderCore(PluginHost* host, bool render_sync)
    : host_(host),
      render_sync_(render_sync),
      scene_provider_(std::make_unique<NativeSceneProvider>()) {
  mjr_defaultContext(&context_);
}

RenderCore::~RenderCore() {
  // Without check_can_wait(): the env that owns this core is going (EnvCore destroys it before
  // its host), and no capture or acquire_plugin scope can outlast the env that runs it.
  try {
    close_unchecked();
  } catch (...) {
  }
}

void RenderCore::set_scene_provider(std::unique_ptr<SceneProvider> provider) {
  scene_provider_ = std::move(provider);
}

RenderStatistics RenderCore::statistics() const {
  RenderStatistics stats;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats = stats_;
  }
  stats.captures = captures_.load();
  stats.capture_drops = capture_drops_.load();
  return stats;
}

}  // namespace mjfast
