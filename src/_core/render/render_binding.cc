// RenderCore's binding (render_core.h): handles opened on a model generation's cameras, bound
// to them at a load's end, retired at reload (pending until the next bind) and closed with the
// env. Each of these calls takes bound_mutex_ on the caller's thread (the rules: render_core.h).
#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include "common/call_context.h"
#include "common/errors.h"
#include "plugin_host/plugin_host.h"
#include "render/render_core.h"

namespace mjfast {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// The id of the camera a handle is opened by: its name, or for an unnamed camera
// `camera_<id>` (as mjfast.sim.camera.camera_names names it); -1 if there is none.
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

}  // namespace

void RenderCore::check_can_wait(const char* what) const {
  using call_context::Refusal;
  if (capturing_on_this_thread()) call_context::refuse(Refusal::kRenderCallback, what);
  if (host_ && host_->scope_held_by_this_thread()) {
    call_context::refuse(Refusal::kAcquireBlock, what);
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

}  // namespace mjfast
