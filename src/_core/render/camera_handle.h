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

#include <mujoco/mujoco.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "render/frame_store.h"

namespace mjfast {

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

// Throws std::logic_error on a thread inside a plugin callback: opening a camera would re-enter
// the step. Cheap and GIL-free; RenderCore::open and the native plugins' host services ask first.
void check_can_open_camera();

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
  // Makes a capture due at the end of the next step, whatever the rate (a frame on demand: gym's
  // render() of the state a step() left). Frames must be enabled first.
  void request_frame();
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

  // -- The bound state, for RenderCore -------------------------------------------------------
  // bind, unbind and set_state run under RenderCore's bound_mutex_ and take this handle's mutex
  // (lock order in env_core.h). The rest is read by the capture (under bound_mutex_, so never
  // during a bind) and by the render thread (a turn of a generation that retire() waits for
  // before it unbinds): lock-free, or for a moment under the handle's mutex.

  // Binds to camera `camera_id` of the model, with its scenes (one per snapshot slot) already
  // made; applies the setter calls queued while pending. `wake` is called, with no lock held,
  // when frames are enabled on the bound camera (a new capture is due at once).
  void bind(int camera_id, const CameraConfig& config, std::array<mjvScene*, 2> scenes,
            std::function<void()> wake);
  // Drops the bound state and enters `next`; returns the scenes for the caller to release.
  std::array<mjvScene*, 2> unbind(State next);
  void set_state(State state);

  // Set by bind: width, height, planes and rate. Read without the lock (see above).
  const CameraConfig& bound_config() const { return config_; }
  bool frames_enabled() const { return frames_enabled_.load(std::memory_order_acquire); }
  // The simulated time at which the next capture is due (-inf: at once).
  double next_due() const { return next_due_.load(); }
  void set_next_due(double time) { next_due_.store(time); }
  // Builds this camera's view of `data`, with the handle's settings at this moment, into its
  // scene for snapshot slot `slot`; returns that scene.
  mjvScene* update_scene(const mjModel* model, mjData* data, std::size_t slot);
  // The store `plane` renders into, or null where the plane is off or frames are not enabled.
  FrameStore* store(Plane plane) const;
  void count_capture() { captures_.fetch_add(1, std::memory_order_relaxed); }
  void count_capture_drop() { capture_drops_.fetch_add(1, std::memory_order_relaxed); }
  void count_frames_rendered(std::uint64_t n) {
    frames_rendered_.fetch_add(n, std::memory_order_relaxed);
  }

 private:
  // One set_geom_group / set_visual_flag call, applied at once or queued while pending.
  struct Setting {
    bool is_flag;  // else a geom group
    int index;
    bool enabled;
  };

  void require_live_locked() const;
  void require_usable_locked() const;  // live or pending: setters may run or queue
  void set_option(const Setting& setting);
  void apply_locked(const Setting& setting);
  void allocate_stores_locked();

  const std::string name_;
  mutable std::mutex mutex_;
  State state_ = State::kPending;
  std::vector<Setting> queued_;
  mjvOption option_;  // the handle's settings; copied by each capture
  bool frames_requested_ = false;
  int history_ = 1;
  std::array<std::uint64_t, kPlaneCount> last_taken_{};

  // Bound state: set by bind(), read by the physics thread (captures) and the render thread.
  std::function<void()> wake_;
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
