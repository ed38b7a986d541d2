// RenderCore: renders the env's offscreen cameras on its own thread, which alone owns the GL
// context (SPEC §10). The physics thread, at the end of a step at which some camera is due
// (rate_hz in simulated time), builds each due camera's mjvScene (plugins' render_callback
// geometry included) into one of two snapshot slots and queues it; it never waits for rendering
// (no free slot: the capture is dropped and counted), except with render_sync, where each turn
// finishes before the next step starts. It owns the cameras' binding to a model generation and
// their retirement at reload and close; it does not own the model, the data or the plugins.
// EnvCore owns it (env_core.h); the bindings only expose it.
//
// One concept per file: render_core.cc (lifetime, statistics), render_binding.cc (the binding and
// retirement), render_capture.cc (the schedule and the physics thread's capture) and
// render_thread.cc (the render thread and its GL passes).
//
// Threads and locks: the order of every mutex named here is in env_core.h (THE LOCK ORDER); this
// says what each of RenderCore's guards and who takes it.
//
// bound_mutex_  the binding: handles_, bound_, model_, closed_, and writes of loading_.
//   - The stepping thread holds it in after_step (so under EnvCore's step_mutex_, and after
//     EnvCore has dropped its per-step host lock) for the whole capture, including each render
//     dispatch, which takes the host's physics-side mutex_ (PluginHost::dispatch_render; never
//     control_mutex_) and, for a Python plugin, the GIL. An acquire_plugin scope holds
//     control_mutex_ -> mutex_, so a capture may wait for a scope, never the other way round.
//   - open, begin_load, bind, pending_names, live_names, retire, close and notify_time_reset take
//     it on the caller's thread, with the GIL released (the bindings release it: a capture may
//     be waiting for the GIL) and no other RenderCore lock held. Each refuses (std::logic_error)
//     where the wait could never end: on a thread inside this core's capture (a render_callback),
//     and on a thread holding this env's acquire_plugin scope (the host mutexes a capture may be
//     waiting for). open() also refuses inside any plugin callback (hooks::in_dispatch(), §10).
//   - open() from a plugin's load(), under both host mutexes, is the lock order's one reverse
//     edge (env_core.h says why no capture holds bound_mutex_ then).
// queue_mutex_  the snapshot slots, the queue and the render thread's state. after_step takes
//   it inside bound_mutex_ to claim a slot, and alone to queue the turn (and, with render_sync, to
//   wait for it); retire() alone, to wait for the turn in flight; the render thread, never while
//   rendering. Nothing but stats_mutex_ is taken under it.
// stats_mutex_  leaf: the render thread's figures.
// CameraHandle::mutex_  per handle: its methods (user code and plugins, GIL held) and, for a
//   moment under bound_mutex_, after_step (copies the options), bind and unbind. Never held while
//   calling out or waiting, so a handle method is callable from anywhere.
// FrameStore::mutex_  leaf per store: the render thread and handle methods.
//
// The render thread takes only queue_mutex_, stats_mutex_ and frame store mutexes (never the GIL,
// step_mutex_, bound_mutex_ or a host mutex), so after_step and retire may wait for it.
//
// MuJoCo errors on the render thread (mjr_makeContext, mjr_render, ...) are caught by a
// mujoco_guard::Scope held for the thread's life and thrown as exceptions (never a jump: the
// thread's frames own frames and locks). A failed turn ends the thread: the GL state after
// MuJoCo's error is unknown. Its frames are dropped, the error is counted in statistics()
// (render_errors, render_error), raised once by the next step's after_step and by open(), and
// cleared by the next retire (a reload), whose bind starts a fresh thread and context.
//
// Queries callable from anywhere (any thread, a render_callback, an acquire_plugin block) take no
// lock the capture holds while calling into plugins: statistics() (stats_mutex_ and atomics),
// render_sync(), wake() (the handles' wake callback) and every handle method.
#pragma once

#include <mujoco/mujoco.h>

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

#include "common/generation.h"
#include "common/step_observer.h"
#include "render/camera_handle.h"

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
  // An error on the render thread (MuJoCo's mju_error in mjr_*, e.g. a render_callback that left
  // the scene unrenderable) stops rendering until the next reload; it is counted and kept here.
  std::uint64_t render_errors = 0;
  std::string render_error;
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
  // The names of the pending handles (each handle once), for the caller to resolve configs.
  std::vector<std::string> pending_names() const;
  // The names of the live handles (each once): those a reload will rebind, whose configs the
  // caller checks before the reload commits.
  std::vector<std::string> live_names() const;
  // Binds every pending handle whose name has a config; the others become unavailable for good.
  // Returns the names that had none (missing in the new model).
  std::vector<std::string> bind(const std::map<std::string, CameraConfig>& configs);

  // Opens a handle on camera `name` (which the caller checked exists): pending while loading,
  // bound at once otherwise. Refuses (std::logic_error) as check_can_open_camera()
  // (camera_handle.h) and check_can_wait() do.
  std::shared_ptr<CameraHandle> open(const std::string& name, const CameraConfig& config);
  // Throws std::logic_error where taking bound_mutex_ could wait forever: on a thread inside this
  // core's capture (a render_callback), or holding this env's acquire_plugin scope. `what` names
  // the call in the message.
  void check_can_wait(const char* what) const;

  // Start of a reload: every handle becomes unavailable, in-flight rendering finishes, queued
  // turns become stale, scenes are released.
  void retire();
  // retire() for good, then the render thread stops and the GL context is destroyed.
  void close();
  // The simulated time moved back (reset): every camera is due at the next step.
  void notify_time_reset() override;

  // Takes only stats_mutex_: callable from anywhere (see above).
  RenderStatistics statistics() const;
  // Test support: while held, the render thread picks up no turn.
  void set_render_hold(bool held);

  // StepObserver
  std::exception_ptr after_step(const mjModel* model, mjData* data,
                                ModelGeneration generation) override;

 private:
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

  // The binding (render_binding.cc).
  std::vector<std::string> names_in_state(CameraHandle::State state, const char* what) const;
  void bind_locked(CameraHandle& handle, int camera_id, const CameraConfig& config,
                   std::array<mjvScene*, 2> scenes);
  std::array<mjvScene*, 2> make_scenes(const CameraConfig& config);
  void release_scenes(const std::vector<std::array<mjvScene*, 2>>& scenes);
  void prune_unreferenced_locked();
  void retire_handles(CameraHandle::State next);
  void close_unchecked();

  // The schedule and the capture (render_capture.cc; physics thread), in after_step's order.
  void recompute_due_locked();
  // The wake callback of the bound handles: frames were just enabled on one.
  void wake();
  // Whether this thread is inside this core's capture (a render_callback): check_can_wait.
  bool capturing_on_this_thread() const;
  bool any_due_locked(double now);
  int find_free_slot();
  // Captures each due camera into slot `slot_index`, or with -1 (no free slot) drops and counts
  // each due camera's capture. Returns the first error, which the step raises.
  std::exception_ptr capture_locked(const mjModel* model, mjData* data, ModelGeneration generation,
                                    int slot_index);
  // Refuses a full scene, then adds the plugins' render_callback geometry; returns what went
  // wrong (the camera's capture is then skipped).
  std::exception_ptr complete_scene(const CameraHandle& handle, const mjModel* model, mjData* data,
                                    ModelGeneration generation, mjvScene* scene);
  void queue_turn(int slot_index);

  // The render thread (render_thread.cc).
  void ensure_render_thread();
  void run_render_thread();
  // Makes the GL context current on this thread; false (thread_error_ set) where it cannot.
  bool start_gl();
  // A turn picked up from the queue (queue_mutex_ held by `lock`, released while rendering):
  // renders it, or discards it where its cameras were retired; frees the slot.
  void take_turn(Slot& slot, std::unique_lock<std::mutex>& lock);
  void render_turn(Slot& slot);
  void render_job(const Slot& slot, const Job& job);
  void fit_offscreen(int width, int height);
  void render_rgb(const mjrRect& viewport, mjvScene* scene, Frame& frame);
  void render_segment_pass(const mjrRect& viewport, mjvScene* scene, bool colours, bool depth);
  void read_depth(const mjModel* model, const mjvScene& scene, Frame& frame);
  void read_segmentation(const mjvScene& scene, Frame& frame);
  // The render thread's end after an error in a turn (queue_mutex_ held by `lock`).
  void fail_rendering(const std::exception_ptr& error, std::unique_lock<std::mutex>& lock);
  // After a failed render thread (with retire's lock order: no RenderCore lock held): joins it
  // and clears the failure, so that the next bind starts a fresh thread and GL context.
  void recover_from_render_failure();

  PluginHost* host_;
  const bool render_sync_;
  std::unique_ptr<SceneProvider> scene_provider_;

  mutable std::mutex bound_mutex_;
  const mjModel* model_ = nullptr;
  ModelGeneration model_generation_;
  std::atomic<bool> loading_{false};
  bool closed_ = false;
  std::vector<std::shared_ptr<CameraHandle>> handles_;  // every handle not yet closed
  std::vector<CameraHandle*> bound_;                    // the live ones
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
  // Set once a render turn failed (thread_error_ then holds the error, which open() raises): the
  // thread has ended, no turn is queued any more, and the next step raises the error once.
  std::atomic<bool> render_failed_{false};
  std::exception_ptr unraised_render_error_;  // under queue_mutex_

  mutable std::mutex stats_mutex_;
  RenderStatistics stats_;
  std::atomic<std::uint64_t> capture_drops_{0};
  std::atomic<std::uint64_t> captures_{0};

  // Render thread only.
  std::unique_ptr<GlContext> gl_;
  mjrContext context_;
  bool context_made_ = false;
  ModelGeneration context_generation_;  // of the model context_ was made for; none: 0
  std::vector<unsigned char> scratch_rgb_;
  std::vector<float> scratch_depth_;
  std::vector<std::int32_t> segment_objects_;  // see decode_segments
  std::vector<std::int32_t> scratch_segments_;
};

}  // namespace mjfast
