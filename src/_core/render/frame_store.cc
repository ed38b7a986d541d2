#include "render/frame_store.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace mjfast {

const char* plane_name(Plane plane) {
  const auto index = static_cast<std::size_t>(plane);
  return index < kPlaneCount ? kPlaneNames[index] : "?";
}

Plane parse_plane(const char* name) {
  std::string known;
  for (std::size_t i = 0; i < kPlaneCount; ++i) {
    if (std::strcmp(name, kPlaneNames[i]) == 0) return static_cast<Plane>(i);
    known += (i ? ", " : "") + std::string(kPlaneNames[i]);
  }
  throw std::invalid_argument(std::string("unknown plane '") + name + "' (planes: " + known + ")");
}

void linearise_depth(float* depth, std::size_t count, float znear, float zfar, bool orthographic) {
  // Exactly as mujoco.Renderer: float32 coefficients of the reversed-Z perspective (or
  // orthographic) projection, undone in double, stored as float32.
  const float c_linear = zfar - znear;
  float c_coef = -(zfar + znear) / (zfar - znear);
  float d_coef = -(2.0f * zfar * znear) / (zfar - znear);
  c_coef = -0.5f * c_coef - 0.5f;
  d_coef = -0.5f * d_coef;
  for (std::size_t i = 0; i < count; ++i) {
    const double z = depth[i];
    const double metres = orthographic
                              ? static_cast<double>(zfar) - z * static_cast<double>(c_linear)
                              : static_cast<double>(d_coef) / (z + static_cast<double>(c_coef));
    depth[i] = static_cast<float>(metres);
  }
}

void decode_segments(const unsigned char* colours, std::size_t count,
                     const std::vector<std::int32_t>& objects, std::int32_t* pairs) {
  const std::size_t entries = objects.size() / 2;
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned char* colour = colours + 3 * i;
    const std::size_t segid =
        colour[0] + (colour[1] << 8) + (static_cast<unsigned>(colour[2]) << 16);
    const std::size_t entry = segid < entries ? segid : 0;
    pairs[2 * i] = objects[entry * 2];
    pairs[2 * i + 1] = objects[entry * 2 + 1];
  }
}

std::size_t Frame::channels() const {
  return plane == Plane::kRgb ? 3 : plane == Plane::kDepth ? 1 : 2;
}

std::size_t Frame::element_size() const { return plane == Plane::kRgb ? 1 : 4; }

FrameStore::FrameStore(Plane plane, int width, int height, int capacity) {
  if (capacity < 1) throw std::invalid_argument("a frame store needs at least one slot");
  slots_.resize(static_cast<std::size_t>(capacity));
  for (Slot& slot : slots_) {
    slot.frame = std::make_shared<Frame>();
    slot.frame->plane = plane;
    slot.frame->width = width;
    slot.frame->height = height;
    // Allocated once, here: rendering never allocates pixels.
    slot.frame->bytes.resize(static_cast<std::size_t>(width) * static_cast<std::size_t>(height) *
                             slot.frame->channels() * slot.frame->element_size());
  }
}

FrameStore::Slot* FrameStore::slot_of(const Frame* frame) {
  for (Slot& slot : slots_) {
    if (slot.frame.get() == frame) return &slot;
  }
  return nullptr;
}

std::shared_ptr<Frame> FrameStore::begin_write() {
  std::lock_guard<std::mutex> lock(mutex_);
  // use_count() == 1 means only the store holds the frame: leases are only ever created under
  // this mutex, so nobody can take one between this check and the write.
  Slot* chosen = nullptr;
  for (Slot& slot : slots_) {
    if (slot.state == SlotState::kFree && slot.frame.use_count() == 1) {
      chosen = &slot;
      break;
    }
  }
  if (!chosen) {
    for (Slot& slot : slots_) {
      if (slot.state != SlotState::kComplete || slot.frame.use_count() != 1) continue;
      if (!chosen || slot.order < chosen->order) chosen = &slot;
    }
  }
  if (!chosen) {
    ++dropped_;
    return nullptr;
  }
  chosen->state = SlotState::kWriting;
  return chosen->frame;
}

void FrameStore::commit(const std::shared_ptr<Frame>& frame) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot* slot = slot_of(frame.get());
  if (!slot) return;
  slot->state = SlotState::kComplete;
  slot->order = next_order_++;
}

std::shared_ptr<const Frame> FrameStore::latest_after(std::uint64_t after) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Slot* newest = nullptr;
  for (const Slot& slot : slots_) {
    if (slot.state != SlotState::kComplete || slot.frame->capture_id <= after) continue;
    if (!newest || slot.order > newest->order) newest = &slot;
  }
  return newest ? newest->frame : nullptr;
}

std::vector<std::shared_ptr<const Frame>> FrameStore::recent(std::size_t n) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<const Slot*> complete;
  for (const Slot& slot : slots_) {
    if (slot.state == SlotState::kComplete) complete.push_back(&slot);
  }
  std::sort(complete.begin(), complete.end(),
            [](const Slot* a, const Slot* b) { return a->order < b->order; });
  if (complete.size() > n) complete.erase(complete.begin(), complete.end() - static_cast<long>(n));
  std::vector<std::shared_ptr<const Frame>> frames;
  frames.reserve(complete.size());
  for (const Slot* slot : complete) frames.push_back(slot->frame);
  return frames;
}

std::uint64_t FrameStore::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

}  // namespace mjfast
