// RenderCore's render thread (render_core.h), which alone owns the GL context: it picks up the
// queued turns, renders each job's scene offscreen (colour, then one segment pass for depth and
// segmentation, as mujoco.Renderer) into the camera's frame stores, and ends after an error
// (kept for the next step and the next reload).
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

#include "common/errors.h"
#include "common/mujoco_guard.h"
#include "render/gl_context.h"
#include "render/render_core.h"

namespace mjfast {
namespace {

// Niceness of the render thread (and of the GL driver threads it starts), relative to 0.
constexpr int kRenderThreadNice = 10;

// One plane's frame of a render job: a free frame of the plane's store to render into, or none
// (the plane is off; or dropped: the store had no free frame, and counted it).
struct PlaneWrite {
  explicit PlaneWrite(FrameStore* plane_store)
      : store(plane_store), frame(plane_store ? plane_store->begin_write() : nullptr) {}
  FrameStore* store;
  std::shared_ptr<Frame> frame;
};

std::size_t pixel_count(int width, int height) {
  return static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
}

}  // namespace

void RenderCore::ensure_render_thread() {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  if (thread_error_) std::rethrow_exception(thread_error_);
  if (render_thread_.joinable() || stopping_) return;
  render_thread_ = std::thread([this] { run_render_thread(); });
  // The GL context is made on the render thread: wait for it, so that a machine without EGL
  // fails here, at open/bind, with a clear message.
  queue_changed_.wait(lock, [&] { return thread_ready_ || thread_error_; });
  if (thread_error_) {
    lock.unlock();
    render_thread_.join();
    std::rethrow_exception(thread_error_);
  }
}

void RenderCore::run_render_thread() {
  // Asynchronous rendering is background work that must never slow the physics thread: on a
  // machine that rasterises in software it would otherwise compete for the same cores. Lower
  // this thread's priority before the GL context exists, so that the rasteriser threads Mesa
  // starts from it inherit it too. (Raising nice needs no privilege; a failure changes nothing.)
  // With render_sync the physics thread waits for each turn: rendering is on its critical path.
  if (!render_sync_) {
    setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), kRenderThreadNice);
  }
  // MuJoCo's errors in mjr_* on this thread are thrown (to take_turn), never fatal.
  const mujoco_guard::Scope guard;
  if (!start_gl()) return;
  std::unique_lock<std::mutex> lock(queue_mutex_);
  thread_ready_ = true;
  queue_changed_.notify_all();
  while (true) {
    queue_changed_.wait(lock, [&] { return stopping_ || (!held_ && !queue_.empty()); });
    if (stopping_) break;
    const int index = queue_.front();
    queue_.erase(queue_.begin());
    take_turn(slots_[static_cast<std::size_t>(index)], lock);
    if (render_failed_.load(std::memory_order_relaxed)) break;
  }
  // Pending sync waiters were released by stopping_ (or by the failed turn's freed slot); drop
  // the GL state on its own thread.
  lock.unlock();
  try {
    if (context_made_) mjr_freeContext(&context_);
  } catch (...) {  // a MuJoCo error freeing a context already in trouble: nothing left to do
  }
  context_made_ = false;
  gl_.reset();
}

bool RenderCore::start_gl() {
  try {
    gl_ = GlContext::create(800, 800);
    gl_->make_current();
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.backend = gl_->backend();
    return true;
  } catch (...) {
    gl_.reset();
    std::lock_guard<std::mutex> lock(queue_mutex_);
    thread_error_ = std::current_exception();
    queue_changed_.notify_all();
    return false;
  }
}

void RenderCore::take_turn(Slot& slot, std::unique_lock<std::mutex>& lock) {
  if (slot.render_generation != render_generation_) {
    // Generation check at pick-up: the cameras of this turn were retired.
    slot.jobs.clear();
    slot.state = SlotState::kFree;
    {
      std::lock_guard<std::mutex> stats_lock(stats_mutex_);
      ++stats_.stale_turns;
    }
    queue_changed_.notify_all();
    return;
  }
  slot.state = SlotState::kRendering;
  rendering_ = true;
  lock.unlock();
  const auto start = std::chrono::steady_clock::now();
  std::exception_ptr failure;
  try {
    render_turn(slot);
  } catch (...) {
    failure = std::current_exception();
  }
  const auto wall = std::chrono::steady_clock::now() - start;
  {
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    ++stats_.turns;
    stats_.render_wall_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(wall).count());
  }
  lock.lock();
  slot.jobs.clear();
  slot.state = SlotState::kFree;
  rendering_ = false;
  if (failure) fail_rendering(failure, lock);
  queue_changed_.notify_all();
}

void RenderCore::fail_rendering(const std::exception_ptr& error,
                                std::unique_lock<std::mutex>& /*queue_lock*/) {
  const std::string message = describe_exception(error);
  {
    std::lock_guard<std::mutex> stats_lock(stats_mutex_);
    ++stats_.render_errors;
    stats_.render_error = message;
  }
  thread_error_ = std::make_exception_ptr(
      std::runtime_error("rendering stopped after an error on the render thread: " + message +
                         " (no camera renders until env.reload())"));
  unraised_render_error_ = thread_error_;
  render_failed_.store(true, std::memory_order_release);
  // Queued turns will never be rendered: free their slots (a render_sync waiter is released).
  for (const int index : queue_) {
    Slot& queued = slots_[static_cast<std::size_t>(index)];
    queued.jobs.clear();
    queued.state = SlotState::kFree;
  }
  queue_.clear();
}

void RenderCore::recover_from_render_failure() {
  if (!render_failed_.load(std::memory_order_acquire)) return;
  std::thread failed;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    failed = std::move(render_thread_);
  }
  if (failed.joinable()) failed.join();  // it ended by itself after the failed turn
  std::lock_guard<std::mutex> lock(queue_mutex_);
  thread_error_ = nullptr;
  unraised_render_error_ = nullptr;
  thread_ready_ = false;
  render_failed_.store(false, std::memory_order_release);
}

void RenderCore::render_turn(Slot& slot) {
  if (!context_made_ || context_generation_ != slot.model_generation) {
    if (context_made_) mjr_freeContext(&context_);
    mjr_defaultContext(&context_);
    // Made from here on, even partly: if MuJoCo gives up inside mjr_makeContext, the render
    // thread ends (take_turn) and frees what it did make.
    context_made_ = true;
    context_generation_ = ModelGeneration();
    // As mujoco.Renderer: its font scale, the offscreen buffer, depth read as [0 far..1 near].
    mjr_makeContext(slot.model, &context_, mjFONTSCALE_150);
    mjr_setBuffer(mjFB_OFFSCREEN, &context_);
    context_.readDepthMap = mjDEPTH_ZEROFAR;
    context_generation_ = slot.model_generation;
  }
  for (const Job& job : slot.jobs) render_job(slot, job);
}

void RenderCore::render_job(const Slot& slot, const Job& job) {
  CameraHandle& camera = *job.camera;
  const CameraConfig& config = camera.bound_config();
  fit_offscreen(config.width, config.height);
  const mjrRect viewport{0, 0, config.width, config.height};
  std::uint64_t rendered = 0;
  std::uint64_t dropped = 0;  // planes whose store had no free frame (the store counts it too)
  auto publish = [&](const PlaneWrite& write) {
    if (!write.store) return;
    if (!write.frame) {
      ++dropped;
      return;
    }
    write.frame->simulation_time_ns = job.simulation_time_ns;
    write.frame->capture_id = job.capture_id;
    write.frame->frame_generation = slot.model_generation;
    write.store->commit(write.frame);
    ++rendered;
  };
  const PlaneWrite rgb(camera.store(Plane::kRgb));
  if (rgb.frame) render_rgb(viewport, job.scene, *rgb.frame);
  publish(rgb);
  const PlaneWrite depth(camera.store(Plane::kDepth));
  const PlaneWrite segments(camera.store(Plane::kSegmentation));
  if (depth.frame || segments.frame) {
    render_segment_pass(viewport, job.scene, segments.frame != nullptr, depth.frame != nullptr);
  }
  if (depth.frame) read_depth(slot.model, *job.scene, *depth.frame);
  publish(depth);
  if (segments.frame) read_segmentation(*job.scene, *segments.frame);
  publish(segments);
  camera.count_frames_rendered(rendered);
  std::lock_guard<std::mutex> stats_lock(stats_mutex_);
  stats_.frames_rendered += rendered;
  stats_.frames_dropped += dropped;
}

void RenderCore::fit_offscreen(int width, int height) {
  if (width > context_.offWidth || height > context_.offHeight) {
    mjr_resizeOffscreen(std::max(width, context_.offWidth), std::max(height, context_.offHeight),
                        &context_);
    mjr_setBuffer(mjFB_OFFSCREEN, &context_);
  }
}

void RenderCore::render_rgb(const mjrRect& viewport, mjvScene* scene, Frame& frame) {
  scratch_rgb_.resize(pixel_count(viewport.width, viewport.height) * 3);
  mjr_render(viewport, scene, &context_);
  mjr_readPixels(scratch_rgb_.data(), nullptr, viewport, &context_);
  copy_flipped(scratch_rgb_.data(), frame.bytes.data(), viewport.width, viewport.height, 3);
}

void RenderCore::render_segment_pass(const mjrRect& viewport, mjvScene* scene, bool colours,
                                     bool depth) {
  // As mujoco.Renderer: depth and segmentation come from one pass with segment colours, which
  // also keeps depth exact at far distances.
  const mjtByte segment_flag = scene->flags[mjRND_SEGMENT];
  const mjtByte idcolor_flag = scene->flags[mjRND_IDCOLOR];
  scene->flags[mjRND_SEGMENT] = 1;
  scene->flags[mjRND_IDCOLOR] = 1;
  mjr_render(viewport, scene, &context_);
  scene->flags[mjRND_SEGMENT] = segment_flag;
  scene->flags[mjRND_IDCOLOR] = idcolor_flag;
  const std::size_t pixels = pixel_count(viewport.width, viewport.height);
  scratch_rgb_.resize(pixels * 3);
  scratch_depth_.resize(pixels);
  mjr_readPixels(colours ? scratch_rgb_.data() : nullptr, depth ? scratch_depth_.data() : nullptr,
                 viewport, &context_);
}

void RenderCore::read_depth(const mjModel* model, const mjvScene& scene, Frame& frame) {
  auto* metres = reinterpret_cast<float*>(frame.bytes.data());
  copy_flipped(scratch_depth_.data(), metres, frame.width, frame.height, 1);
  const double extent = model->stat.extent;
  linearise_depth(metres, pixel_count(frame.width, frame.height),
                  static_cast<float>(model->vis.map.znear * extent),
                  static_cast<float>(model->vis.map.zfar * extent),
                  scene.camera[0].orthographic != 0);
}

void RenderCore::read_segmentation(const mjvScene& scene, Frame& frame) {
  // Entry segid + 1 is the (object id, object type) of the geom with that segment id; entry 0,
  // the background, is (-1, -1).
  const int ngeom = scene.ngeom;
  segment_objects_.assign(static_cast<std::size_t>(ngeom + 1) * 2, -1);
  for (int g = 0; g < ngeom; ++g) {
    const mjvGeom& geom = scene.geoms[g];
    if (geom.segid < 0 || geom.segid + 1 > ngeom) continue;
    segment_objects_[static_cast<std::size_t>(geom.segid + 1) * 2] = geom.objid;
    segment_objects_[static_cast<std::size_t>(geom.segid + 1) * 2 + 1] = geom.objtype;
  }
  const std::size_t pixels = pixel_count(frame.width, frame.height);
  scratch_segments_.resize(pixels * 2);
  decode_segments(scratch_rgb_.data(), pixels, segment_objects_, scratch_segments_.data());
  copy_flipped(scratch_segments_.data(), reinterpret_cast<std::int32_t*>(frame.bytes.data()),
               frame.width, frame.height, 2);
}

void RenderCore::set_render_hold(bool held) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    held_ = held;
  }
  queue_changed_.notify_all();
}

}  // namespace mjfast
