#include "render/frame_store.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace mjfast {
namespace {

std::shared_ptr<Frame> write(FrameStore& store, std::uint64_t capture_id) {
  std::shared_ptr<Frame> frame = store.begin_write();
  if (frame) {
    frame->capture_id = capture_id;
    store.commit(frame);
  }
  return frame;
}

TEST(FrameStore, SizesFramesByPlane) {
  FrameStore rgb(Plane::kRgb, 4, 3, 2);
  EXPECT_EQ(rgb.begin_write()->bytes.size(), 4u * 3u * 3u);
  FrameStore depth(Plane::kDepth, 4, 3, 2);
  EXPECT_EQ(depth.begin_write()->bytes.size(), 4u * 3u * sizeof(float));
  EXPECT_THROW(parse_plane("infrared"), std::invalid_argument);
  EXPECT_EQ(parse_plane("segmentation"), Plane::kSegmentation);
}

TEST(FrameStore, LatestAfterGivesTheNewestFrameNotYetSeen) {
  FrameStore store(Plane::kRgb, 2, 2, 3);
  EXPECT_EQ(store.latest_after(0), nullptr);
  write(store, 1);
  write(store, 2);
  auto latest = store.latest_after(0);
  ASSERT_NE(latest, nullptr);
  EXPECT_EQ(latest->capture_id, 2u);
  EXPECT_EQ(store.latest_after(2), nullptr);  // nothing newer than what this reader took
}

TEST(FrameStore, RecentIsOldestFirstAndBounded) {
  FrameStore store(Plane::kRgb, 2, 2, 3);
  for (std::uint64_t id = 1; id <= 5; ++id) write(store, id);
  auto recent = store.recent(2);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0]->capture_id, 4u);
  EXPECT_EQ(recent[1]->capture_id, 5u);
}

TEST(FrameStore, ALeasedFrameIsNeverOverwrittenAndAFullStoreDrops) {
  FrameStore store(Plane::kRgb, 2, 2, 2);
  write(store, 1);
  write(store, 2);
  auto first = store.recent(2)[0];
  auto second = store.recent(2)[1];
  ASSERT_EQ(first->capture_id, 1u);
  // Both slots leased: the next frame has nowhere to go.
  EXPECT_EQ(store.begin_write(), nullptr);
  EXPECT_EQ(store.dropped(), 1u);
  EXPECT_EQ(first->capture_id, 1u);
  // One lease released: the oldest unleased slot is reused, the leased one is kept.
  first.reset();
  write(store, 3);
  EXPECT_EQ(second->capture_id, 2u);
  EXPECT_EQ(store.latest_after(2)->capture_id, 3u);
}

}  // namespace
}  // namespace mjfast
