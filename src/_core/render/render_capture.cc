// RenderCore's capture (render_core.h), the physics thread's half: the schedule of due cameras
// in simulated time, and at the end of a step at which one is due, each due camera's scene built
// into a free snapshot slot (render_callback geometry included) and queued for the render
// thread.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

#include "common/hooks.h"
#include "plugin_host/plugin_host.h"
#include "render/render_core.h"

namespace mjfast {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A camera counts as due this close before its time: steps land on multiples of the timestep,
// which rarely equal multiples of the camera period exactly.
constexpr double kDueTolerance = 1e-9;

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

}  // namespace

bool RenderCore::capturing_on_this_thread() const { return capturing_core == this; }

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

}  // namespace mjfast
