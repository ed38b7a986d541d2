#include "handoff/handoff_ring.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace mjfast {
namespace {

using Ring = HandoffRing<int>;
using std::chrono::milliseconds;

std::vector<std::pair<std::uint32_t, int>> take_all(Ring& ring) {
  std::vector<Ring::Item> out;
  const std::size_t count = ring.take(out, 100, milliseconds(0));
  std::vector<std::pair<std::uint32_t, int>> items;
  for (std::size_t i = 0; i < count; ++i) items.emplace_back(out[i].key, out[i].payload);
  return items;
}

TEST(HandoffRing, HandsItemsOverInOrder) {
  Ring ring(4, HandoffPolicy::kKeepNewest);
  int displaced = 0;
  for (int i = 0; i < 3; ++i) {
    int payload = i;
    EXPECT_EQ(ring.try_push(static_cast<std::uint32_t>(i), payload, displaced),
              Ring::Pushed::kTaken);
  }
  using Items = std::vector<std::pair<std::uint32_t, int>>;
  EXPECT_EQ(take_all(ring), (Items{{0, 0}, {1, 1}, {2, 2}}));
  EXPECT_EQ(ring.pushed(), 3u);
  EXPECT_EQ(ring.dropped(), 0u);
  EXPECT_TRUE(take_all(ring).empty());
}

TEST(HandoffRing, AFullKeepNewestRingReplacesTheNewestOfTheSameKey) {
  Ring ring(3, HandoffPolicy::kKeepNewest);
  int displaced = -1;
  int payloads[] = {10, 20, 11, 12};
  std::uint32_t keys[] = {1, 2, 1, 1};
  for (int i = 0; i < 3; ++i) ring.try_push(keys[i], payloads[i], displaced);
  // Full: key 1's newest waiting item (11) is replaced in place by 12.
  EXPECT_EQ(ring.try_push(keys[3], payloads[3], displaced), Ring::Pushed::kDisplaced);
  EXPECT_EQ(displaced, 11);
  using Items = std::vector<std::pair<std::uint32_t, int>>;
  EXPECT_EQ(take_all(ring), (Items{{1, 10}, {2, 20}, {1, 12}}));
  EXPECT_EQ(ring.dropped(), 1u);
}

TEST(HandoffRing, AFullKeepNewestRingDisplacesTheOldestForANewKey) {
  Ring ring(2, HandoffPolicy::kKeepNewest);
  int displaced = -1;
  int a = 1, b = 2, c = 3;
  ring.try_push(1, a, displaced);
  ring.try_push(2, b, displaced);
  EXPECT_EQ(ring.try_push(3, c, displaced), Ring::Pushed::kDisplaced);
  EXPECT_EQ(displaced, 1);
  using Items = std::vector<std::pair<std::uint32_t, int>>;
  EXPECT_EQ(take_all(ring), (Items{{2, 2}, {3, 3}}));
}

TEST(HandoffRing, AFullWaitRingRefusesUntilTheWriterTakes) {
  Ring ring(1, HandoffPolicy::kWait);
  int displaced = 0;
  int first = 1, second = 2;
  EXPECT_EQ(ring.try_push(0, first, displaced), Ring::Pushed::kTaken);
  EXPECT_EQ(ring.try_push(0, second, displaced), Ring::Pushed::kFull);
  std::atomic<bool> pushed{false};
  std::atomic<bool> refused{false};
  std::thread producer([&] {
    while (ring.try_push(0, second, displaced) == Ring::Pushed::kFull) {
      refused = true;
      if (!ring.wait_for_room()) return;
    }
    pushed = true;
  });
  // The producer waits until the writer takes; the writer takes once the producer was refused.
  while (!refused) std::this_thread::yield();
  std::vector<Ring::Item> out;
  ASSERT_EQ(ring.take(out, 1, milliseconds(1000)), 1u);
  EXPECT_EQ(out[0].payload, 1);
  ASSERT_EQ(ring.take(out, 1, milliseconds(5000)), 1u);
  EXPECT_EQ(out[0].payload, 2);
  producer.join();
  EXPECT_TRUE(pushed);
  EXPECT_EQ(ring.dropped(), 0u);
  EXPECT_GE(ring.waits(), 1u);
}

TEST(HandoffRing, CloseWakesAWaitingProducerAndRefusesPushes) {
  Ring ring(1, HandoffPolicy::kWait);
  int displaced = 0;
  int first = 1;
  ring.try_push(0, first, displaced);
  std::atomic<bool> refused{false};
  std::thread producer([&] {
    int second = 2;
    while (true) {
      const Ring::Pushed pushed = ring.try_push(0, second, displaced);
      if (pushed == Ring::Pushed::kClosed) break;
      if (pushed == Ring::Pushed::kFull && !ring.wait_for_room()) break;
    }
    refused = true;
  });
  ring.close();
  producer.join();
  EXPECT_TRUE(refused);
  int third = 3;
  EXPECT_EQ(ring.try_push(0, third, displaced), Ring::Pushed::kClosed);
  // What waited before the close can still be taken.
  using Items = std::vector<std::pair<std::uint32_t, int>>;
  EXPECT_EQ(take_all(ring), (Items{{0, 1}}));
}

TEST(HandoffRing, TakeWaitsForTheFirstItem) {
  Ring ring(8, HandoffPolicy::kKeepNewest);
  std::thread producer([&] {
    int displaced = 0;
    for (int i = 0; i < 1000; ++i) {
      int payload = i;
      ring.try_push(0, payload, displaced);
    }
  });
  std::vector<Ring::Item> out;
  std::vector<int> seen;
  while (seen.empty() || seen.back() != 999) {
    const std::size_t count = ring.take(out, 8, milliseconds(5000));
    ASSERT_GT(count, 0u);
    for (std::size_t i = 0; i < count; ++i) seen.push_back(out[i].payload);
  }
  producer.join();
  // Newer items only, in order; what is missing was dropped and counted.
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
  EXPECT_EQ(seen.size() + ring.dropped(), 1000u);
}

TEST(HandoffRing, WaitReadyWaitsForAnItemWithoutTakingIt) {
  Ring ring(4, HandoffPolicy::kWait);
  EXPECT_FALSE(ring.wait_ready(milliseconds(0)));   // empty: at once
  EXPECT_FALSE(ring.wait_ready(milliseconds(20)));  // empty: the time runs out
  std::thread producer([&] {
    int payload = 7;
    int displaced = 0;
    ring.try_push(3, payload, displaced);
  });
  EXPECT_TRUE(ring.wait_ready(milliseconds(5000)));
  producer.join();
  EXPECT_TRUE(ring.wait_ready(milliseconds(0)));  // still there: not taken
  EXPECT_EQ(ring.waiting(), 1u);
  ring.close();
  EXPECT_TRUE(ring.wait_ready(milliseconds(0)));  // closed, but an item still waits
  EXPECT_EQ(take_all(ring), (std::vector<std::pair<std::uint32_t, int>>{{3, 7}}));
  EXPECT_FALSE(ring.wait_ready(milliseconds(5000)));  // closed and empty: at once
}

TEST(HandoffRing, RefusesZeroSlots) {
  EXPECT_THROW(Ring(0, HandoffPolicy::kWait), std::invalid_argument);
}

}  // namespace
}  // namespace mjfast
