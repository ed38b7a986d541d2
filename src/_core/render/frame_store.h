// FrameStore: the fixed set of frame buffers of one camera plane, sized when frames are enabled.
// The render thread writes into a free slot, or evicts the oldest completed frame that nobody
// leases; when every slot is leased the new frame is dropped and counted. A lease is a
// shared_ptr to the frame: a leased frame is never overwritten or freed under its holder.
// It owns the pixels only; what is rendered and when is RenderCore's business.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "common/generation.h"

namespace mjfast {

enum class Plane : std::uint8_t { kRgb, kDepth, kSegmentation };
inline constexpr std::size_t kPlaneCount = 3;
// THE plane names, in Plane's order (exported as _core.PLANES, which mjfast.camera checks).
inline constexpr const char* kPlaneNames[kPlaneCount] = {"rgb", "depth", "segmentation"};
const char* plane_name(Plane plane);
// Parses one of kPlaneNames; throws std::invalid_argument naming them otherwise.
Plane parse_plane(const char* name);

struct Frame {
  Plane plane = Plane::kRgb;
  int width = 0;
  int height = 0;
  // RGB: H*W*3 uint8; depth: H*W float32 metres; segmentation: H*W*2 int32 (object id, type).
  std::vector<unsigned char> bytes;
  std::int64_t simulation_time_ns = 0;
  std::uint64_t capture_id = 0;
  ModelGeneration frame_generation;  // of the model it was rendered from

  std::size_t channels() const;
  std::size_t element_size() const;
};

// -- Filling a frame from an OpenGL readout (render thread) ----------------------------------
// Free of GL and of MuJoCo, so that the frame layout above is tested on its own (tests/cpp).

// Rows come out of OpenGL bottom-up; frames are top-down like mujoco.Renderer's.
template <class T>
void copy_flipped(const T* source, T* target, int width, int height, int channels) {
  const std::size_t row = static_cast<std::size_t>(width) * static_cast<std::size_t>(channels);
  for (int r = 0; r < height; ++r) {
    std::memcpy(target + static_cast<std::size_t>(r) * row,
                source + static_cast<std::size_t>(height - 1 - r) * row, row * sizeof(T));
  }
}

// Depth as OpenGL reads it with MuJoCo's reversed Z ([0 far..1 near], mjDEPTH_ZEROFAR) to metres,
// in place. `znear` and `zfar` are the clip planes in metres (vis.map.znear/zfar * stat.extent).
void linearise_depth(float* depth, std::size_t count, float znear, float zfar, bool orthographic);

// Segmentation colours (3 bytes per pixel: segment id + 1, 0 the background) to (object id,
// object type) pairs: entry i of `objects` is the pair at objects[2i], objects[2i + 1]; a colour
// with no entry is the background (entry 0).
void decode_segments(const unsigned char* colours, std::size_t count,
                     const std::vector<std::int32_t>& objects, std::int32_t* pairs);

class FrameStore {
 public:
  FrameStore(Plane plane, int width, int height, int capacity);

  // Render thread: a frame to render into, or null (the frame is dropped and counted) when
  // every slot is leased or being written.
  std::shared_ptr<Frame> begin_write();
  // Render thread: publishes a frame taken from begin_write as the newest.
  void commit(const std::shared_ptr<Frame>& frame);

  // The newest completed frame with capture_id > after, leased; or null.
  std::shared_ptr<const Frame> latest_after(std::uint64_t after) const;
  // Up to n of the newest completed frames, oldest first, leased.
  std::vector<std::shared_ptr<const Frame>> recent(std::size_t n) const;

  std::uint64_t dropped() const;

 private:
  enum class SlotState : std::uint8_t { kFree, kWriting, kComplete };
  struct Slot {
    std::shared_ptr<Frame> frame;
    SlotState state = SlotState::kFree;
    std::uint64_t order = 0;  // commit order, for eviction and recency
  };
  Slot* slot_of(const Frame* frame);

  mutable std::mutex mutex_;
  std::vector<Slot> slots_;
  std::uint64_t next_order_ = 1;
  std::uint64_t dropped_ = 0;
};

}  // namespace mjfast
