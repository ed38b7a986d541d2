// CameraHandle: one offscreen camera as a plugin or user code holds it (SPEC §10). It keeps the
// handle's own settings (geom groups, visual flags, frames) across reloads, records setter calls
// made while a load or reload is in progress and applies them in call order once the camera is
// bound, and lends frames from its frame stores. What is captured when, and the rendering itself,
// are RenderCore's; the handle only holds the per-camera state RenderCore binds and retires.
//
// Errors (the native plugin contract): CameraUnavailableError ("camera is unavailable during
// reload") from a call that needs a live camera while there is none; std::logic_error for
// take_latest before enable_frames and for enable_frames twice.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <mujoco/mujoco.h>

#include "frame_store.h"

namespace mjfast {

class RenderCore;

inline constexpr const char* kCameraUnavailableMessage = "camera is unavailable during reload";

// The parameters of one camera (parameter server `<namespace>/cameras/<name>`).
struct CameraConfig {
  int width = 0;
  int height = 0;
  std::array<bool, kPlaneCount> planes{true, false, false};
  double rate_hz = 30.0;
  int max_geom = 10000;
};

struct CameraStatistics {
  std::uint64_t captures = 0;       // snapshots taken for this camera
  std::uint64_t capture_drops = 0;  // due, but both snapshot slots were busy
  std::uint64_t frames_rendered = 0;
  std::uint64_t frames_dropped = 0;  // rendered into a full frame store (every frame leased)
};

class CameraHandle {
 public:
  enum class State : std::uint8_t { kPending, kLive, kRetiring, kMissing, kClosed };

  explicit CameraHandle(std::string name);
  CameraHandle(const CameraHandle&) = delete;
  CameraHandle& operator=(const CameraHandle&) = delete;
  ~CameraHandle();

  const std::string& name() const { return name_; }
  State state() const;

  void set_geom_group(int group, bool enabled);
  void set_visual_flag(int flag, bool enabled);
  void enable_frames(int history = 1);
  bool geom_group_enabled(int group) const;
  bool visual_flag_enabled(int flag) const;
  // The newest completed frame newer than the last one this handle took, leased; or null.
  std::shared_ptr<const Frame> take_latest(Plane plane);
  // Up to n (at most the history) of the newest completed frames of `plane`, oldest first,
  // leased.
  std::vector<std::shared_ptr<const Frame>> take_recent(Plane plane, int n);
  bool plane_configured(Plane plane) const;
  CameraConfig config() const;
  CameraStatistics statistics() const;

 private:
  friend class RenderCore;

  struct QueuedSetting {
    bool is_flag;  // else a geom group
    int index;
    bool enabled;
  };

  void require_live_locked() const;
  void require_usable_locked() const;  // live or pending: setters may run or queue
  void allocate_stores_locked();

  // RenderCore, with the camera's scenes already made: binds to camera `camera_id` of the model.
  void bind(int camera_id, const CameraConfig& config, std::array<mjvScene*, 2> scenes,
            RenderCore* core);
  // RenderCore: drops the bound state; returns the scenes for the core to release.
  std::array<mjvScene*, 2> unbind(State next);
  void set_state(State state);

  const std::string name_;
  mutable std::mutex mutex_;
  State state_ = State::kPending;
  std::vector<QueuedSetting> queued_;
  mjvOption option_;  // the handle's settings; copied by each capture
  bool frames_requested_ = false;
  int history_ = 1;
  std::array<std::uint64_t, kPlaneCount> last_taken_{};

  // Bound state: set by bind(), read by the physics thread (captures) and the render thread.
  RenderCore* core_ = nullptr;
  int camera_id_ = -1;
  CameraConfig config_;
  mjvCamera camera_;
  std::array<mjvScene*, 2> scenes_{nullptr, nullptr};
  std::array<std::shared_ptr<FrameStore>, kPlaneCount> stores_;
  std::atomic<bool> frames_enabled_{false};
  std::atomic<double> next_due_{0.0};
  std::atomic<std::uint64_t> captures_{0};
  std::atomic<std::uint64_t> capture_drops_{0};
  std::atomic<std::uint64_t> frames_rendered_{0};
  std::uint64_t retired_frames_dropped_ = 0;  // from stores of earlier generations
};

}  // namespace mjfast
