#include "render_core.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "errors.h"
#include "gl_context.h"
#include "hooks.h"
#include "mujoco_guard.h"
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

// The id of the camera a handle is opened by: its name, or for an unnamed camera
// `camera_<id>` (as mjfast.camera.camera_names names it); -1 if there is none.
int camera_id_of(const mjModel* model, const std::string& name) {
  if (!model) return -1;
  const int named = mj_name2id(model, mjOBJ_CAMERA, name.c_str());
  if (named >= 0) return named;
  const std::string prefix = "camera_";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  const int index = std::stoi(digits);
  if (index >= model->ncam) return -1;
  const char* own = mj_id2name(model, mjOBJ_CAMERA, index);
  return own == nullptr || own[0] == '\0' ? index : -1;
}

bool is_due(const CameraHandle& handle, double now) {
  return handle.frames_enabled() && now + kDueTolerance >= handle.next_due();
}

// Whether `handle` is due at `now`; if so, its next capture moves on by one period (to a period
// from now where it fell behind).
bool take_if_due(CameraHandle& handle, double now) {
  if (!is_due(handle, now)) return false;
  const double rate_hz = handle.bound_config().rate_hz;
  const double period = rate_hz > 0 ? 1.0 / rate_hz : 0.0;
  double next = handle.next_due() + period;
  if (next <= now + kDueTolerance) next = now + period;
  handle.set_next_due(next);
  return true;
}

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

RenderCore::RenderCore(PluginHost* host, bool render_sync)
    : host_(host),
      render_sync_(render_sync),
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
    throw std::logic_error(std::string(what) +
                           " called from a render_callback would deadlock: "
                           "the capture it runs in holds the cameras");
  }
  if (host_ && host_->scope_held_by_this_thread()) {
    throw std::logic_error(std::string(what) +
                           " inside an acquire_plugin() block would "
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
      const int camera_id = camera_id_of(model_, handle.name());
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
  handle.bind(camera_id, config, scenes, [this] { wake(); });
  bound_.push_back(&handle);
}

std::shared_ptr<CameraHandle> RenderCore::open(const std::string& name,
                                               const CameraConfig& config) {
  check_can_open_camera();
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
  const int camera_id = camera_id_of(model_, name);
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
                                         std::find(bound_.begin(), bound_.end(), handle.get()) ==
                                             bound_.end();
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
  recover_from_render_failure();  // a reload (or close) clears it: the next bind starts afresh
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
  for (CameraHandle* handle : bound_) handle->set_next_due(-kInfinity);
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
    if (handle->frames_enabled()) due = std::min(due, handle->next_due());
  }
  next_due_time_.store(due);
  // With nothing scheduled, a jump back in time has nothing to restart: keep due() false.
  if (due == kInfinity) last_observed_time_.store(-kInfinity);
  if (wake_requested_.exchange(false)) next_due_time_.store(-kInfinity);
}

// -- the physics thread's half -------------------------------------------------------------

std::exception_ptr RenderCore::after_step(const mjModel* model, mjData* data,
                                          ModelGeneration generation) {
  if (render_failed_.load(std::memory_order_acquire)) {
    // Nothing renders until a reload: no capture, and no step is due meanwhile (a wake-up from
    // enable_frames comes back here once). The failure is raised by one step.
    std::lock_guard<std::mutex> lock(bound_mutex_);
    next_due_time_.store(kInfinity);
    last_observed_time_.store(-kInfinity);
    std::lock_guard<std::mutex> queue_lock(queue_mutex_);
    return std::exchange(unraised_render_error_, nullptr);
  }
  int slot_index = -1;  // the snapshot slot captured into; none while nothing is due or free
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(bound_mutex_);
    const CaptureMark capturing(this);
    if (loading_.load(std::memory_order_relaxed) || bound_.empty()) {
      recompute_due_locked();
      return nullptr;
    }
    if (any_due_locked(data->time)) slot_index = find_free_slot();
    error = capture_locked(model, data, generation, slot_index);
    recompute_due_locked();
  }
  if (slot_index >= 0) queue_turn(slot_index);
  return error;
}

bool RenderCore::any_due_locked(double now) {
  // Time went back (a reset, or user code setting data.time, mj_resetData, a keyframe): the
  // schedule restarts, every camera is due now.
  if (now < last_observed_time_.load()) {
    for (CameraHandle* handle : bound_) handle->set_next_due(-kInfinity);
  }
  last_observed_time_.store(now);
  return std::any_of(bound_.begin(), bound_.end(),
                     [now](const CameraHandle* handle) { return is_due(*handle, now); });
}

int RenderCore::find_free_slot() {
  // A free slot is the capture's alone (the render thread takes only queued ones, and captures
  // run one at a time under bound_mutex_): it stays free, unclaimed, until queue_turn.
  std::lock_guard<std::mutex> lock(queue_mutex_);
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == SlotState::kFree) return static_cast<int>(i);
  }
  return -1;
}

std::exception_ptr RenderCore::capture_locked(const mjModel* model, mjData* data,
                                              ModelGeneration generation, int slot_index) {
  Slot* slot = slot_index >= 0 ? &slots_[static_cast<std::size_t>(slot_index)] : nullptr;
  if (slot) {
    slot->jobs.clear();
    slot->model = model;
    slot->model_generation = generation;
  }
  const double now = data->time;
  const auto time_ns = static_cast<std::int64_t>(std::llround(now * 1e9));
  std::exception_ptr error;  // the first one: what the step raises
  for (CameraHandle* handle : bound_) {
    if (!take_if_due(*handle, now)) continue;
    if (!slot) {
      handle->count_capture_drop();
      capture_drops_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    mjvScene* scene = handle->update_scene(model, data, static_cast<std::size_t>(slot_index));
    if (std::exception_ptr raised = complete_scene(*handle, model, data, generation, scene)) {
      if (!error) error = std::move(raised);
      continue;
    }
    handle->count_capture();
    captures_.fetch_add(1, std::memory_order_relaxed);
    slot->jobs.push_back(Job{handle, scene, time_ns, next_capture_id_++});
  }
  return error;
}

std::exception_ptr RenderCore::complete_scene(const CameraHandle& handle, const mjModel* model,
                                              mjData* data, ModelGeneration generation,
                                              mjvScene* scene) {
  // MuJoCo truncates a full scene with only a global warning: refuse the frame instead.
  if (scene->ngeom >= scene->maxgeom) {
    return std::make_exception_ptr(
        std::length_error("camera '" + handle.name() + "': the scene is full (max_geom " +
                          std::to_string(scene->maxgeom) +
                          "): the model has at least as much visual "
                          "geometry; raise the camera's max_geom parameter"));
  }
  if (!host_ || !host_->has_callback(Callback::kRender)) return nullptr;
  hooks::DispatchScope dispatching;
  if (std::exception_ptr raised = host_->dispatch_render(generation, model, data, scene)) {
    return raised;
  }
  if (scene->ngeom > scene->maxgeom || scene->ngeom < 0) {
    return std::make_exception_ptr(std::length_error(
        "render_callback geometry overflows the scene of camera '" + handle.name() + "': ngeom " +
        std::to_string(scene->ngeom) + " > max_geom " + std::to_string(scene->maxgeom) +
        " (raise the camera's max_geom parameter)"));
  }
  return nullptr;
}

void RenderCore::queue_turn(int slot_index) {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  Slot& slot = slots_[static_cast<std::size_t>(slot_index)];
  if (render_failed_.load(std::memory_order_relaxed)) slot.jobs.clear();  // no thread to render
  if (slot.jobs.empty()) return;                // nothing captured: the slot stays free
  slot.render_generation = render_generation_;  // generation check at queue time
  slot.state = SlotState::kQueued;
  queue_.push_back(slot_index);
  queue_changed_.notify_all();
  if (render_sync_) {
    // The render thread never takes the step lock or the GIL, so waiting here cannot deadlock.
    queue_changed_.wait(lock, [&] { return slot.state == SlotState::kFree || stopping_; });
  }
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
