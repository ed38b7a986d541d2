#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "control/control_bridge.h"

namespace mjfast {
namespace {

TEST(TripleBuffer, ConsumerSeesOnlyTheNewestPublishedValue) {
  TripleBuffer<int> buffer;
  EXPECT_FALSE(buffer.has_fresh());
  EXPECT_FALSE(buffer.take());
  buffer.back() = 1;
  buffer.publish();
  buffer.back() = 2;
  buffer.publish();  // replaces 1, which nobody took
  ASSERT_TRUE(buffer.take());
  EXPECT_EQ(buffer.front(), 2);
  EXPECT_FALSE(buffer.take());  // nothing newer: the front stays
  EXPECT_EQ(buffer.front(), 2);
}

TEST(TripleBuffer, DiscardForgetsWhatWasPublished) {
  TripleBuffer<int> buffer;
  buffer.back() = 7;
  buffer.publish();
  buffer.discard();
  EXPECT_FALSE(buffer.has_fresh());
  EXPECT_FALSE(buffer.take());
}

// A value whose halves a torn read would tell apart.
struct Pair {
  std::uint64_t first = 0;
  std::uint64_t second = 0;
};

TEST(TripleBuffer, ConcurrentProducerAndConsumerNeverTearAndNeverGoBack) {
  TripleBuffer<Pair> buffer;
  constexpr std::uint64_t kValues = 200000;
  std::atomic<bool> done{false};
  std::thread producer([&] {
    for (std::uint64_t value = 1; value <= kValues; ++value) {
      buffer.back() = {value, value};
      buffer.publish();
    }
    done = true;
  });
  std::uint64_t last = 0;
  std::uint64_t taken = 0;
  while (!done || buffer.has_fresh()) {
    if (!buffer.take()) continue;
    const Pair& pair = buffer.front();
    ASSERT_EQ(pair.first, pair.second);
    ASSERT_GT(pair.first, last);
    last = pair.first;
    ++taken;
  }
  producer.join();
  EXPECT_EQ(last, kValues);  // the last value published is the last one seen
  EXPECT_GT(taken, 0u);
}

}  // namespace
}  // namespace mjfast
