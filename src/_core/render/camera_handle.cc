#include "render/camera_handle.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/hooks.h"

namespace mjfast {

void check_can_open_camera() {
  if (hooks::in_dispatch()) {
    call_context::refuse(call_context::Refusal::kCameraFromStep, "open_offscreen_camera()");
  }
}
namespace {

void check_group(int group) {
  if (group < 0 || group >= mjNGROUP) {
    throw std::invalid_argument("geom group must be in [0, " + std::to_string(mjNGROUP) +
                                "), got " + std::to_string(group));
  }
}

void check_flag(int flag) {
  if (flag < 0 || flag >= mjNVISFLAG) {
    throw std::invalid_argument("visual flag must be an mjtVisFlag in [0, " +
                                std::to_string(mjNVISFLAG) + "), got " + std::to_string(flag));
  }
}

}  // namespace

CameraHandle::CameraHandle(std::string name) : name_(std::move(name)) {
  mjv_defaultOption(&option_);
  mjv_defaultCamera(&camera_);
}

CameraHandle::~CameraHandle() = default;

CameraHandle::State CameraHandle::state() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

void CameraHandle::require_live_locked() const {
  if (state_ != State::kLive) throw CameraUnavailableError(kCameraUnavailableMessage);
}

void CameraHandle::require_usable_locked() const {
  if (state_ != State::kLive && state_ != State::kPending) {
    throw CameraUnavailableError(kCameraUnavailableMessage);
  }
}

void CameraHandle::set_geom_group(int group, bool enabled) { set_option({false, group, enabled}); }

void CameraHandle::set_visual_flag(int flag, bool enabled) { set_option({true, flag, enabled}); }

void CameraHandle::set_option(const Setting& setting) {
  std::lock_guard<std::mutex> lock(mutex_);
  require_usable_locked();
  if (setting.is_flag) {
    check_flag(setting.index);
  } else {
    check_group(setting.index);
  }
  if (state_ == State::kPending) {
    queued_.push_back(setting);
  } else {
    apply_locked(setting);
  }
}

void CameraHandle::apply_locked(const Setting& setting) {
  mjtByte* values = setting.is_flag ? option_.flags : option_.geomgroup;
  values[setting.index] = setting.enabled ? 1 : 0;
}

void CameraHandle::enable_frames(int history) {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    require_usable_locked();
    if (frames_requested_) {
      throw std::logic_error("enable_frames() called twice on the handle of camera '" + name_ +
                             "'");
    }
    if (history < 1) {
      throw std::invalid_argument("enable_frames(history) needs history >= 1, got " +
                                  std::to_string(history));
    }
    frames_requested_ = true;
    history_ = history;
    // While pending, the request is applied when the camera is bound (bind() sees it).
    if (state_ == State::kLive) {
      allocate_stores_locked();
      wake = wake_;
    }
  }
  if (wake) wake();
}

void CameraHandle::request_frame() {
  std::function<void()> wake;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    require_usable_locked();
    if (!frames_requested_) {
      throw std::logic_error("request_frame() before enable_frames() on the handle of camera '" +
                             name_ + "'");
    }
    // A pending camera captures at once when it is bound (allocate_stores_locked).
    if (state_ != State::kLive) return;
    next_due_.store(-std::numeric_limits<double>::infinity());
    wake = wake_;
  }
  if (wake) wake();  // lock-free: the capture re-reads the due times after the next step
}

void CameraHandle::allocate_stores_locked() {
  // history completed frames, plus one slot to render the next into.
  for (std::size_t p = 0; p < kPlaneCount; ++p) {
    if (!config_.planes[p]) continue;
    stores_[p] = std::make_shared<FrameStore>(static_cast<Plane>(p), config_.width, config_.height,
                                              history_ + 1);
  }
  next_due_.store(-std::numeric_limits<double>::infinity());
  frames_enabled_.store(true, std::memory_order_release);
}

bool CameraHandle::geom_group_enabled(int group) const {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  check_group(group);
  return option_.geomgroup[group] != 0;
}

bool CameraHandle::visual_flag_enabled(int flag) const {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  check_flag(flag);
  return option_.flags[flag] != 0;
}

bool CameraHandle::plane_configured(Plane plane) const {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  return config_.planes[static_cast<std::size_t>(plane)];
}

CameraConfig CameraHandle::config() const {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  return config_;
}

std::shared_ptr<const Frame> CameraHandle::take_latest(Plane plane) {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  if (!frames_requested_) {
    throw std::logic_error("take_latest() before enable_frames() on the handle of camera '" +
                           name_ + "'");
  }
  const auto p = static_cast<std::size_t>(plane);
  if (!config_.planes[p]) {
    throw std::invalid_argument(std::string("camera '") + name_ + "' has no " + plane_name(plane) +
                                " plane configured (set its 'planes' "
                                "parameter)");
  }
  std::shared_ptr<const Frame> frame = stores_[p]->latest_after(last_taken_[p]);
  if (frame) last_taken_[p] = frame->capture_id;
  return frame;
}

std::vector<std::shared_ptr<const Frame>> CameraHandle::take_recent(Plane plane, int n) {
  std::lock_guard<std::mutex> lock(mutex_);
  require_live_locked();
  if (!frames_requested_) {
    throw std::logic_error("take_recent() before enable_frames() on the handle of camera '" +
                           name_ + "'");
  }
  if (n < 0) throw std::invalid_argument("take_recent(plane, n) needs n >= 0");
  const auto p = static_cast<std::size_t>(plane);
  if (!config_.planes[p]) {
    throw std::invalid_argument(std::string("camera '") + name_ + "' has no " + plane_name(plane) +
                                " plane configured");
  }
  // The store keeps one slot more than the history (to render into): show only the history.
  return stores_[p]->recent(static_cast<std::size_t>(std::min(n, history_)));
}

CameraStatistics CameraHandle::statistics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  CameraStatistics stats;
  stats.captures = captures_.load();
  stats.capture_drops = capture_drops_.load();
  stats.frames_rendered = frames_rendered_.load();
  stats.frames_dropped = retired_frames_dropped_;
  for (const auto& store : stores_) {
    if (store) stats.frames_dropped += store->dropped();
  }
  return stats;
}

void CameraHandle::bind(int camera_id, const CameraConfig& config, std::array<mjvScene*, 2> scenes,
                        std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mutex_);
  wake_ = std::move(wake);
  camera_id_ = camera_id;
  config_ = config;
  mjv_defaultCamera(&camera_);
  camera_.type = mjCAMERA_FIXED;
  camera_.fixedcamid = camera_id;
  scenes_ = scenes;
  // Queued setter calls, in call order, on top of the settings kept from earlier generations.
  for (const Setting& setting : queued_) apply_locked(setting);
  queued_.clear();
  if (frames_requested_) allocate_stores_locked();
  state_ = State::kLive;
}

std::array<mjvScene*, 2> CameraHandle::unbind(State next) {
  std::lock_guard<std::mutex> lock(mutex_);
  frames_enabled_.store(false, std::memory_order_release);
  for (auto& store : stores_) {
    if (store) retired_frames_dropped_ += store->dropped();
    store.reset();  // leased frames stay alive through their leases
  }
  const auto scenes = scenes_;
  scenes_ = {nullptr, nullptr};
  wake_ = nullptr;
  camera_id_ = -1;
  state_ = next;
  return scenes;
}

void CameraHandle::set_state(State state) {
  std::lock_guard<std::mutex> lock(mutex_);
  state_ = state;
}

mjvScene* CameraHandle::update_scene(const mjModel* model, mjData* data, std::size_t slot) {
  mjvOption option;
  {
    // Copied, not held: mjv_updateScene takes a while, and handle methods must not wait for it.
    std::lock_guard<std::mutex> lock(mutex_);
    option = option_;
  }
  mjvScene* scene = scenes_[slot];
  mjv_updateScene(model, data, &option, nullptr, &camera_, mjCAT_ALL, scene);
  return scene;
}

FrameStore* CameraHandle::store(Plane plane) const {
  const auto p = static_cast<std::size_t>(plane);
  return config_.planes[p] ? stores_[p].get() : nullptr;
}

}  // namespace mjfast
