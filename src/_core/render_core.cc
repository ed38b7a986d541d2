#include "render_core.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "errors.h"
#include "gl_context.h"
#include "hooks.h"
#include "plugin_host.h"

namespace mjfast {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A camera counts as due this close before its time: steps land on multiples of the timestep,
// which rarely equal multiples of the camera period exactly.
constexpr double kDueTolerance = 1e-9;
// Niceness of the render thread (and of the GL driver threads it starts), relative to 0.
constexpr int kRenderThreadNice = 10;

// The core whose capture this thread is running (bound_mutex_ held, render callbacks being
// dispatched), if any: a call from a render_callback that would take bound_mutex_ again is
// refused instead of deadlocking.
thread_local const RenderCore* capturing_core = nullptr;

class CaptureMark {
 public:
  explicit CaptureMark(const RenderCore* core) : previous_(capturing_core) {
    capturing_core = core;
  }
  ~CaptureMark() { capturing_core = previous_; }
  CaptureMark(const CaptureMark&) = delete;
  CaptureMark& operator=(const CaptureMark&) = delete;

 private:
  const RenderCore* previous_;
};

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

// Rows come out of OpenGL bottom-up; frames are top-down like mujoco.Renderer's.
template <class T>
void copy_flipped(const T* source, T* target, int width, int height, int channels) {
  const std::size_t row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  for (int r = 0; r < height; ++r) {
    std::memcpy(target + static_cast<std::size_t>(r) * row,
                source + static_cast<std::size_t>(height - 1 - r) * row, row * sizeof(T));
  }
}

}  // namespace

RenderCore::RenderCore(PluginHost* host, bool render_sync)
    : host_(host), render_sync_(render_sync),
      scene_provider_(std::make_unique<NativeSceneProvider>()) {
  mjr_defaultContext(&context_);
}

RenderCore::~RenderCore() {
  // Without check_can_wait(): the host may be gone by now (EnvCore destroys its observer before
  // its host, but a Python reference can outlive both), and no capture or acquire_plugin scope
  // can outlast the env that runs it.
  try {
    close_unchecked();
  } catch (...) {
  }
}

void RenderCore::set_scene_provider(std::unique_ptr<SceneProvider> provider) {
  scene_provider_ = std::move(provider);
}

// -- binding ------------------------------------------------------------------------------

void RenderCore::check_can_wait(const char* what) const {
  if (capturing_core == this) {
    throw std::logic_error(std::string(what) + " called from a render_callback would deadlock: "
                           "the capture it runs in holds the cameras");
  }
  if (host_ && host_->scope_held_by_this_thread()) {
    throw std::logic_error(std::string(what) + " inside an acquire_plugin() block would "
                           "deadlock: leave the block first");
  }
}

void RenderCore::begin_load(const mjModel* model, ModelGeneration generation) {
  check_can_wait("loading the cameras");
  std::lock_guard<std::mutex> lock(bound_mutex_);
  if (closed_) throw std::logic_error("the render core is closed");
  model_ = model;
  model_generation_ = generation;
  loading_.store(true, std::memory_order_release);
  prune_unreferenced_locked();
  for (auto& handle : handles_) {
    if (handle->state() == CameraHandle::State::kRetiring) {
      handle->set_state(CameraHandle::State::kPending);
    }
  }
}

std::vector<std::string> RenderCore::names_in_state(CameraHandle::State state,
                                                    const char* what) const {
  check_can_wait(what);
  std::lock_guard<std::mutex> lock(bound_mutex_);
  std::vector<std::string> names;
  for (const auto& handle : handles_) {
    if (handle->state() != state) continue;
    if (std::find(names.begin(), names.end(), handle->name()) == names.end()) {
      names.push_back(handle->name());
    }
  }
  return names;
}

std::vector<std::string> RenderCore::pending_names() const {
  return names_in_state(CameraHandle::State::kPending, "loading the cameras");
}

std::vector<std::string> RenderCore::live_names() const {
  return names_in_state(CameraHandle::State::kLive, "reloading the cameras");
}

std::array<mjvScene*, 2> RenderCore::make_scenes(const CameraConfig& config) {
  return {scene_provider_->make(model_, config.max_geom),
          scene_provider_->make(model_, config.max_geom)};
}

void RenderCore::release_scenes(const std::vector<std::array<mjvScene*, 2>>& scenes) {
  for (const auto& pair : scenes) {
    for (mjvScene* scene : pair) {
      if (scene) scene_provider_->release(scene);
    }
  }
}

std::vector<std::string> RenderCore::bind(const std::map<std::string, CameraConfig>& configs) {
  check_can_wait("loading the cameras");
  // Scenes are made before the lock: the provider may need the GIL.
  std::vector<std::shared_ptr<CameraHandle>> pending;
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    for (auto& handle : handles_) {
      if (handle->state() == CameraHandle::State::kPending) pending.push_back(handle);
    }
  }
  std::vector<std::array<mjvScene*, 2>> scenes(pending.size(), {nullptr, nullptr});
  for (std::size_t i = 0; i < pending.size(); ++i) {
    auto config = configs.find(pending[i]->name());
    if (config != configs.end()) scenes[i] = make_scenes(config->second);
  }
  if (std::any_of(scenes.begin(), scenes.end(), [](const auto& s) { return s[0] != nullptr; })) {
    ensure_render_thread();
  }
  std::vector<std::string> missing;
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    for (std::size_t i = 0; i < pending.size(); ++i) {
      CameraHandle& handle = *pending[i];
      auto config = configs.find(handle.name());
      const int camera_id =
          model_ ? mj_name2id(model_, mjOBJ_CAMERA, handle.name().c_str()) : -1;
      if (config == configs.end() || camera_id < 0) {
        handle.set_state(CameraHandle::State::kMissing);
        if (std::find(missing.begin(), missing.end(), handle.name()) == missing.end()) {
          missing.push_back(handle.name());
        }
        continue;
      }
      bind_locked(handle, camera_id, config->second, scenes[i]);
      scenes[i] = {nullptr, nullptr};
    }
    loading_.store(false, std::memory_order_release);
    recompute_due_locked();
  }
  release_scenes(scenes);  // of handles that turned out missing
  return missing;
}

void RenderCore::bind_locked(CameraHandle& handle, int camera_id, const CameraConfig& config,
                             std::array<mjvScene*, 2> scenes) {
  handle.bind(camera_id, config, scenes, this);
  bound_.push_back(&handle);
}

void RenderCore::check_can_open() {
  if (hooks::in_dispatch()) {
    throw std::logic_error("open_offscreen_camera() called from a step callback: open cameras "
                           "from load() (or outside callbacks)");
  }
}

std::shared_ptr<CameraHandle> RenderCore::open(const std::string& name,
                                               const CameraConfig& config) {
  check_can_open();
  check_can_wait("open_offscreen_camera()");
  auto handle = std::make_shared<CameraHandle>(name);
  bool bind_now = false;
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    if (closed_) throw CameraUnavailableError(kCameraUnavailableMessage);
    bind_now = !loading_.load(std::memory_order_relaxed);
    handles_.push_back(handle);
    if (!bind_now) return handle;  // pending until bind()
  }
  const int camera_id = mj_name2id(model_, mjOBJ_CAMERA, name.c_str());
  if (camera_id < 0) throw std::invalid_argument("the model has no camera '" + name + "'");
  auto scenes = make_scenes(config);
  try {
    ensure_render_thread();
  } catch (...) {
    release_scenes({scenes});
    std::lock_guard<std::mutex> lock(bound_mutex_);
    handles_.erase(std::find(handles_.begin(), handles_.end(), handle));
    throw;
  }
  std::lock_guard<std::mutex> lock(bound_mutex_);
  bind_locked(*handle, camera_id, config, scenes);
  recompute_due_locked();
  return handle;
}

void RenderCore::prune_unreferenced_locked() {
  // A handle that only the core still holds is gone for its owner: do not rebind it.
  handles_.erase(std::remove_if(handles_.begin(), handles_.end(),
                                [this](const std::shared_ptr<CameraHandle>& handle) {
                                  return handle.use_count() == 1 &&
                                         std::find(bound_.begin(), bound_.end(),
                                                   handle.get()) == bound_.end();
                                }),
                 handles_.end());
}

void RenderCore::retire_handles(CameraHandle::State next) {
  {
    // Stale from now on: a queued turn of this generation is discarded when picked up, and the
    // turn being rendered (if any) finishes before the cameras go.
    std::unique_lock<std::mutex> lock(queue_mutex_);
    ++render_generation_;
    queue_changed_.wait(lock, [&] { return !rendering_; });
  }
  std::vector<std::array<mjvScene*, 2>> scenes;
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    for (CameraHandle* handle : bound_) scenes.push_back(handle->unbind(next));
    bound_.clear();
    for (auto& handle : handles_) {
      const auto state = handle->state();
      if (state == CameraHandle::State::kPending || state == CameraHandle::State::kMissing ||
          next == CameraHandle::State::kClosed) {
        handle->set_state(next);
      }
    }
    if (next == CameraHandle::State::kClosed) handles_.clear();
    next_due_time_.store(kInfinity);
    last_observed_time_.store(-kInfinity);
  }
  release_scenes(scenes);
}

void RenderCore::retire() {
  check_can_wait("reloading the cameras");
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    if (closed_) return;
  }
  retire_handles(CameraHandle::State::kRetiring);
}

void RenderCore::close() {
  check_can_wait("closing the cameras");
  close_unchecked();
}

void RenderCore::close_unchecked() {
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    if (closed_) return;
  }
  retire_handles(CameraHandle::State::kClosed);
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    closed_ = true;
  }
  std::thread finished;
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
    finished = std::move(render_thread_);
  }
  queue_changed_.notify_all();
  if (finished.joinable()) finished.join();
}

void RenderCore::notify_time_reset() {
  check_can_wait("reset()");
  std::lock_guard<std::mutex> lock(bound_mutex_);
  for (CameraHandle* handle : bound_) handle->next_due_.store(-kInfinity);
  recompute_due_locked();
}

void RenderCore::wake() {
  // Lock-free on purpose: a handle may call this from a thread that holds the GIL while the
  // physics thread holds bound_mutex_ inside a Python render callback. after_step re-reads the
  // flag after it recomputes the due time, so this wake-up is never lost.
  wake_requested_.store(true);
  next_due_time_.store(-kInfinity);
}

void RenderCore::recompute_due_locked() {
  double due = kInfinity;
  for (CameraHandle* handle : bound_) {
    if (handle->frames_enabled_.load(std::memory_order_acquire)) {
      due = std::min(due, handle->next_due_.load());
    }
  }
  next_due_time_.store(due);
  // With nothing scheduled, a jump back in time has nothing to restart: keep due() false.
  if (due == kInfinity) last_observed_time_.store(-kInfinity);
  if (wake_requested_.exchange(false)) next_due_time_.store(-kInfinity);
}

// -- the physics thread's half -------------------------------------------------------------

std::exception_ptr RenderCore::after_step(const mjModel* model, mjData* data,
                                          ModelGeneration generation) {
  const double now = data->time;
  int slot_index = -1;
  std::exception_ptr error;  // the first one: what the step raises
  auto keep = [&error](std::exception_ptr raised) {
    if (!error) error = std::move(raised);
  };
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    const CaptureMark capturing(this);
    if (loading_.load(std::memory_order_relaxed) || bound_.empty()) {
      recompute_due_locked();
      return nullptr;
    }
    // Time went back (a reset, or user code setting data.time, mj_resetData, a keyframe): the
    // schedule restarts, every camera is due now.
    if (now < last_observed_time_.load()) {
      for (CameraHandle* handle : bound_) handle->next_due_.store(-kInfinity);
    }
    last_observed_time_.store(now);
    bool any_due = false;
    for (CameraHandle* handle : bound_) {
      if (handle->frames_enabled_.load(std::memory_order_acquire) &&
          now + kDueTolerance >= handle->next_due_.load()) {
        any_due = true;
        break;
      }
    }
    if (any_due) {
      std::lock_guard<std::mutex> queue_lock(queue_mutex_);
      for (int i = 0; i < 2; ++i) {
        if (slots_[static_cast<std::size_t>(i)].state == SlotState::kFree) {
          slot_index = i;
          break;
        }
      }
    }
    Slot* slot = slot_index >= 0 ? &slots_[static_cast<std::size_t>(slot_index)] : nullptr;
    if (slot) {
      slot->jobs.clear();
      slot->model = model;
      slot->model_generation = generation;
    }
    const auto time_ns = static_cast<std::int64_t>(std::llround(now * 1e9));
    for (CameraHandle* handle : bound_) {
      if (!handle->frames_enabled_.load(std::memory_order_acquire)) continue;
      const double due = handle->next_due_.load();
      if (now + kDueTolerance < due) continue;
      const double period = handle->config_.rate_hz > 0 ? 1.0 / handle->config_.rate_hz : 0.0;
      double next = due + period;
      if (next <= now + kDueTolerance) next = now + period;
      handle->next_due_.store(next);
      if (!slot) {
        handle->capture_drops_.fetch_add(1, std::memory_order_relaxed);
        capture_drops_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      mjvScene* scene = handle->scenes_[static_cast<std::size_t>(slot_index)];
      mjvOption option;
      {
        std::lock_guard<std::mutex> handle_lock(handle->mutex_);
        option = handle->option_;
      }
      mjv_updateScene(model, data, &option, nullptr, &handle->camera_, mjCAT_ALL, scene);
      // MuJoCo truncates a full scene with only a global warning: refuse the frame instead.
      if (scene->ngeom >= scene->maxgeom) {
        keep(std::make_exception_ptr(std::length_error(
            "camera '" + handle->name() + "': the scene is full (max_geom " +
            std::to_string(scene->maxgeom) + "): the model has at least as much visual "
            "geometry; raise the camera's max_geom parameter")));
        continue;
      }
      if (host_ && host_->has_callback(Callback::kRender)) {
        hooks::DispatchScope dispatching;
        if (std::exception_ptr raised = host_->dispatch_render(generation, model, data, scene)) {
          keep(std::move(raised));
          continue;
        }
        if (scene->ngeom > scene->maxgeom || scene->ngeom < 0) {
          keep(std::make_exception_ptr(std::length_error(
              "render_callback geometry overflows the scene of camera '" + handle->name() +
              "': ngeom " + std::to_string(scene->ngeom) + " > max_geom " +
              std::to_string(scene->maxgeom) + " (raise the camera's max_geom parameter)")));
          continue;
        }
      }
      handle->captures_.fetch_add(1, std::memory_order_relaxed);
      captures_.fetch_add(1, std::memory_order_relaxed);
      slot->jobs.push_back(Job{handle, scene, time_ns, next_capture_id_++});
    }
    recompute_due_locked();
  }
  if (slot_index < 0) return error;
  std::unique_lock<std::mutex> lock(queue_mutex_);
  Slot& slot = slots_[static_cast<std::size_t>(slot_index)];
  if (slot.jobs.empty()) return error;  // still free
  slot.render_generation = render_generation_;  // generation check at queue time
  slot.state = SlotState::kQueued;
  queue_.push_back(slot_index);
  queue_changed_.notify_all();
  if (render_sync_) {
    // The render thread never takes the step lock or the GIL, so waiting here cannot deadlock.
    queue_changed_.wait(lock, [&] { return slot.state == SlotState::kFree || stopping_; });
  }
  return error;
}

// -- the render thread ---------------------------------------------------------------------

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
  try {
    gl_ = GlContext::create(800, 800);
    gl_->make_current();
    std::lock_guard<std::mutex> lock(stats_mutex_);
    stats_.backend = gl_->backend();
  } catch (...) {
    gl_.reset();
    std::lock_guard<std::mutex> lock(queue_mutex_);
    thread_error_ = std::current_exception();
    queue_changed_.notify_all();
    return;
  }
  std::unique_lock<std::mutex> lock(queue_mutex_);
  thread_ready_ = true;
  queue_changed_.notify_all();
  while (true) {
    queue_changed_.wait(lock, [&] { return stopping_ || (!held_ && !queue_.empty()); });
    if (stopping_) break;
    const int index = queue_.front();
    queue_.erase(queue_.begin());
    Slot& slot = slots_[static_cast<std::size_t>(index)];
    if (slot.render_generation != render_generation_) {
      // Generation check at pick-up: the cameras of this turn were retired.
      slot.jobs.clear();
      slot.state = SlotState::kFree;
      {
        std::lock_guard<std::mutex> stats_lock(stats_mutex_);
        ++stats_.stale_turns;
      }
      queue_changed_.notify_all();
      continue;
    }
    slot.state = SlotState::kRendering;
    rendering_ = true;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    render_turn(slot);
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
    queue_changed_.notify_all();
  }
  // Pending sync waiters were released by stopping_; drop the GL state on its own thread.
  lock.unlock();
  if (context_made_) mjr_freeContext(&context_);
  context_made_ = false;
  gl_.reset();
}

void RenderCore::render_turn(Slot& slot) {
  if (!context_made_ || context_generation_ != slot.model_generation.value()) {
    if (context_made_) mjr_freeContext(&context_);
    mjr_defaultContext(&context_);
    // As mujoco.Renderer: its font scale, the offscreen buffer, depth read as [0 far..1 near].
    mjr_makeContext(slot.model, &context_, mjFONTSCALE_150);
    mjr_setBuffer(mjFB_OFFSCREEN, &context_);
    context_.readDepthMap = mjDEPTH_ZEROFAR;
    context_made_ = true;
    context_generation_ = slot.model_generation.value();
  }
  for (const Job& job : slot.jobs) render_job(slot, job);
}

void RenderCore::render_job(const Slot& slot, const Job& job) {
  CameraHandle& camera = *job.camera;
  const CameraConfig& config = camera.config_;
  const int width = config.width;
  const int height = config.height;
  if (width > context_.offWidth || height > context_.offHeight) {
    mjr_resizeOffscreen(std::max(width, context_.offWidth), std::max(height, context_.offHeight),
                        &context_);
    mjr_setBuffer(mjFB_OFFSCREEN, &context_);
  }
  const mjrRect viewport{0, 0, width, height};
  const std::size_t pixels = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  mjvScene* scene = job.scene;
  std::uint64_t rendered = 0;
  std::uint64_t dropped = 0;  // planes whose store had no free slot (the store counts it too)
  auto stamp = [&](Frame& frame) {
    frame.simulation_time_ns = job.simulation_time_ns;
    frame.capture_id = job.capture_id;
    frame.frame_generation = slot.model_generation.value();
  };

  const auto& rgb_store = camera.stores_[static_cast<std::size_t>(Plane::kRgb)];
  if (config.planes[static_cast<std::size_t>(Plane::kRgb)] && rgb_store) {
    if (auto frame = rgb_store->begin_write()) {
      scratch_rgb_.resize(pixels * 3);
      mjr_render(viewport, scene, &context_);
      mjr_readPixels(scratch_rgb_.data(), nullptr, viewport, &context_);
      copy_flipped(scratch_rgb_.data(), frame->bytes.data(), width, height, 3);
      stamp(*frame);
      rgb_store->commit(frame);
      ++rendered;
    } else {
      ++dropped;
    }
  }

  const auto& depth_store = camera.stores_[static_cast<std::size_t>(Plane::kDepth)];
  const auto& segment_store = camera.stores_[static_cast<std::size_t>(Plane::kSegmentation)];
  std::shared_ptr<Frame> depth_frame =
      config.planes[static_cast<std::size_t>(Plane::kDepth)] && depth_store
          ? depth_store->begin_write() : nullptr;
  std::shared_ptr<Frame> segment_frame =
      config.planes[static_cast<std::size_t>(Plane::kSegmentation)] && segment_store
          ? segment_store->begin_write() : nullptr;
  if (config.planes[static_cast<std::size_t>(Plane::kDepth)] && depth_store && !depth_frame) {
    ++dropped;
  }
  if (config.planes[static_cast<std::size_t>(Plane::kSegmentation)] && segment_store &&
      !segment_frame) {
    ++dropped;
  }
  if (depth_frame || segment_frame) {
    // As mujoco.Renderer: depth and segmentation come from one pass with segment colours, which
    // also keeps depth exact at far distances.
    const mjtByte segment_flag = scene->flags[mjRND_SEGMENT];
    const mjtByte idcolor_flag = scene->flags[mjRND_IDCOLOR];
    scene->flags[mjRND_SEGMENT] = 1;
    scene->flags[mjRND_IDCOLOR] = 1;
    mjr_render(viewport, scene, &context_);
    scene->flags[mjRND_SEGMENT] = segment_flag;
    scene->flags[mjRND_IDCOLOR] = idcolor_flag;
    scratch_rgb_.resize(pixels * 3);
    scratch_depth_.resize(pixels);
    mjr_readPixels(segment_frame ? scratch_rgb_.data() : nullptr,
                   depth_frame ? scratch_depth_.data() : nullptr, viewport, &context_);
    if (depth_frame) {
      // Linearise exactly as mujoco.Renderer does: float32 projection coefficients of the
      // reversed-Z perspective (or orthographic) matrix, undone in double, stored as float32.
      const mjModel* model = slot.model;
      const double extent = model->stat.extent;
      const float znear = static_cast<float>(model->vis.map.znear * extent);
      const float zfar = static_cast<float>(model->vis.map.zfar * extent);
      auto* out = reinterpret_cast<float*>(depth_frame->bytes.data());
      const bool orthographic = scene->camera[0].orthographic != 0;
      const float c_linear = zfar - znear;
      float c_coef = -(zfar + znear) / (zfar - znear);
      float d_coef = -(2.0f * zfar * znear) / (zfar - znear);
      c_coef = -0.5f * c_coef - 0.5f;
      d_coef = -0.5f * d_coef;
      for (int r = 0; r < height; ++r) {
        const float* source = scratch_depth_.data() + static_cast<std::size_t>(height - 1 - r) *
                                                           static_cast<std::size_t>(width);
        float* target = out + static_cast<std::size_t>(r) * static_cast<std::size_t>(width);
        for (int c = 0; c < width; ++c) {
          const double z = source[c];
          const double metres = orthographic
                                    ? static_cast<double>(zfar) - z * static_cast<double>(c_linear)
                                    : static_cast<double>(d_coef) / (z + static_cast<double>(c_coef));
          target[c] = static_cast<float>(metres);
        }
      }
      stamp(*depth_frame);
      depth_store->commit(depth_frame);
      ++rendered;
    }
    if (segment_frame) {
      // Segment id (colour) -> (object id, object type); 0 is the background: (-1, -1).
      const int ngeom = scene->ngeom;
      segment_map_.assign(static_cast<std::size_t>(ngeom + 1) * 2, -1);
      for (int g = 0; g < ngeom; ++g) {
        const mjvGeom& geom = scene->geoms[g];
        if (geom.segid < 0 || geom.segid + 1 > ngeom) continue;
        segment_map_[static_cast<std::size_t>(geom.segid + 1) * 2] = geom.objid;
        segment_map_[static_cast<std::size_t>(geom.segid + 1) * 2 + 1] = geom.objtype;
      }
      auto* out = reinterpret_cast<std::int32_t*>(segment_frame->bytes.data());
      for (int r = 0; r < height; ++r) {
        const unsigned char* source =
            scratch_rgb_.data() + static_cast<std::size_t>(height - 1 - r) *
                                      static_cast<std::size_t>(width) * 3;
        std::int32_t* target =
            out + static_cast<std::size_t>(r) * static_cast<std::size_t>(width) * 2;
        for (int c = 0; c < width; ++c) {
          const unsigned segid = source[3 * c] + (source[3 * c + 1] << 8) +
                                 (static_cast<unsigned>(source[3 * c + 2]) << 16);
          const std::size_t entry = segid <= static_cast<unsigned>(ngeom) ? segid : 0;
          target[2 * c] = segment_map_[entry * 2];
          target[2 * c + 1] = segment_map_[entry * 2 + 1];
        }
      }
      stamp(*segment_frame);
      segment_store->commit(segment_frame);
      ++rendered;
    }
  }
  camera.frames_rendered_.fetch_add(rendered, std::memory_order_relaxed);
  std::lock_guard<std::mutex> stats_lock(stats_mutex_);
  stats_.frames_rendered += rendered;
  stats_.frames_dropped += dropped;
}

// -- statistics ----------------------------------------------------------------------------

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

void RenderCore::set_render_hold(bool held) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    held_ = held;
  }
  queue_changed_.notify_all();
}

}  // namespace mjfast
