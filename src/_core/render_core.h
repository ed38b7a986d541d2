// RenderCore: renders the env's offscreen cameras on its own thread, which alone owns the GL
// context (SPEC §10). The physics thread, at the end of a step at which some camera is due
// (rate_hz in simulated time), builds each due camera's mjvScene (plugins' render_callback
// geometry included) into one of two snapshot slots and queues it; it never waits for rendering
// (no free slot: the capture is dropped and counted), except with render_sync, where each turn
// finishes before the next step starts. It owns the cameras' binding to a model generation and
// their retirement at reload and close; it does not own the model, the data or the plugins.
//
// Threads and locks:
//   bound_mutex_  the list of bound cameras; held by the physics thread while it captures (that
//                 may call Python render callbacks: Python callers release the GIL before any
//                 entry point that takes it) and by open/bind/retire.
//   queue_mutex_  snapshot slot states and the render thread's state; never held while rendering.
//   A handle's own mutex is taken under bound_mutex_, never the other way round.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <mujoco/mujoco.h>

#include "camera_handle.h"
#include "generation.h"
#include "step_observer.h"

namespace mjfast {

class PluginHost;
class GlContext;

// Makes and releases the mjvScenes the snapshots are built in, so that the Python bindings can
// hand Python plugins a mujoco.MjvScene for the very scene that is rendered. Called only from
// open/bind/retire/close, on the caller's thread, with no RenderCore lock held.
class SceneProvider {
 public:
  virtual ~SceneProvider() = default;
  virtual mjvScene* make(const mjModel* model, int max_geom) = 0;
  virtual void release(mjvScene* scene) = 0;
};

struct RenderStatistics {
  std::uint64_t captures = 0;
  std::uint64_t capture_drops = 0;  // no free snapshot slot
  std::uint64_t turns = 0;          // render turns completed
  std::uint64_t stale_turns = 0;    // turns of a retired generation, discarded unrendered
  std::uint64_t frames_rendered = 0;
  std::uint64_t frames_dropped = 0;  // full frame stores
  std::uint64_t render_wall_ns = 0;
  std::string backend;
};

class RenderCore final : public StepObserver {
 public:
  // `host` dispatches render_callback; it must outlive every after_step call (EnvCore owns both).
  RenderCore(PluginHost* host, bool render_sync);
  ~RenderCore() override;
  RenderCore(const RenderCore&) = delete;
  RenderCore& operator=(const RenderCore&) = delete;

  void set_scene_provider(std::unique_ptr<SceneProvider> provider);
  SceneProvider& scene_provider() { return *scene_provider_; }
  bool render_sync() const { return render_sync_; }

  // A load (construction) or reload of `model` begins: retired handles and handles opened from
  // now on are pending, their settings queued, until bind().
  void begin_load(const mjModel* model, ModelGeneration generation);
  bool loading() const;
  // The names of the pending handles (each handle once), for the caller to resolve configs.
  std::vector<std::string> pending_names() const;
  // The names of the live handles (each once): those a reload will rebind, whose configs the
  // caller checks before the reload commits.
  std::vector<std::string> live_names() const;
  // Binds every pending handle whose name has a config; the others become unavailable for good.
  // Returns the names that had none (missing in the new model).
  std::vector<std::string> bind(const std::map<std::string, CameraConfig>& configs);

  // Opens a handle on camera `name` (which the caller checked exists): pending while loading,
  // bound at once otherwise. Refuses (std::logic_error) from inside a plugin callback.
  std::shared_ptr<CameraHandle> open(const std::string& name, const CameraConfig& config);
  // Throws std::logic_error on a thread inside a plugin callback (opening would re-enter the step).
  static void check_can_open();

  // Start of a reload: every handle becomes unavailable, in-flight rendering finishes, queued
  // turns become stale, scenes are released.
  void retire();
  // retire() for good, then the render thread stops and the GL context is destroyed.
  void close();
  // The simulated time moved back (reset): every camera is due at the next step.
  void notify_time_reset();

  RenderStatistics statistics() const;
  // Test support: while held, the render thread picks up no turn.
  void set_render_hold(bool held);

  // StepObserver
  std::exception_ptr after_step(const mjModel* model, mjData* data,
                                ModelGeneration generation) override;

  // Called by a handle whose frames were just enabled.
  void wake();

 private:
  std::vector<std::string> names_in_state(CameraHandle::State state) const;
  enum class SlotState : std::uint8_t { kFree, kQueued, kRendering };
  struct Job {
    CameraHandle* camera;
    mjvScene* scene;
    std::int64_t simulation_time_ns;
    std::uint64_t capture_id;
  };
  struct Slot {
    SlotState state = SlotState::kFree;
    std::uint64_t render_generation = 0;
    ModelGeneration model_generation;
    const mjModel* model = nullptr;
    std::vector<Job> jobs;
  };

  void bind_locked(CameraHandle& handle, int camera_id, const CameraConfig& config,
                   std::array<mjvScene*, 2> scenes);
  std::array<mjvScene*, 2> make_scenes(const CameraConfig& config);
  void release_scenes(const std::vector<std::array<mjvScene*, 2>>& scenes);
  void prune_unreferenced_locked();
  void recompute_due_locked();
  void ensure_render_thread();
  void run_render_thread();
  void render_turn(Slot& slot);
  void render_job(const Slot& slot, const Job& job);
  void retire_handles(CameraHandle::State next);

  PluginHost* host_;
  const bool render_sync_;
  std::unique_ptr<SceneProvider> scene_provider_;

  mutable std::mutex bound_mutex_;
  const mjModel* model_ = nullptr;
  ModelGeneration model_generation_;
  bool loading_ = false;
  bool closed_ = false;
  std::vector<std::shared_ptr<CameraHandle>> handles_;  // every handle not yet closed
  std::vector<CameraHandle*> bound_;                     // the live ones
  double last_step_time_ = 0.0;
  std::uint64_t next_capture_id_ = 1;
  std::atomic<bool> wake_requested_{false};

  mutable std::mutex queue_mutex_;
  std::condition_variable queue_changed_;
  std::array<Slot, 2> slots_;
  std::vector<int> queue_;  // slot indices, oldest first
  std::uint64_t render_generation_ = 1;
  bool rendering_ = false;
  bool held_ = false;
  bool stopping_ = false;
  std::thread render_thread_;
  bool thread_ready_ = false;
  std::exception_ptr thread_error_;

  mutable std::mutex stats_mutex_;
  RenderStatistics stats_;
  std::atomic<std::uint64_t> capture_drops_{0};
  std::atomic<std::uint64_t> captures_{0};

  // Render thread only.
  std::unique_ptr<GlContext> gl_;
  mjrContext context_;
  bool context_made_ = false;
  std::uint64_t context_generation_ = 0;
  std::vector<unsigned char> scratch_rgb_;
  std::vector<float> scratch_depth_;
  std::vector<std::int32_t> segment_map_;
};

}  // namespace mjfast
