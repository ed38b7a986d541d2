#include "common/generation.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <type_traits>
#include <vector>

namespace mjfast {
namespace {

// A model generation can never stand for a plugin generation, nor a bare integer for either.
static_assert(!std::is_convertible_v<ModelGeneration, PluginGeneration>);
static_assert(!std::is_convertible_v<PluginGeneration, ModelGeneration>);
static_assert(!std::is_convertible_v<std::uint64_t, ModelGeneration>);

TEST(GenerationId, StartsAtZeroAndCountsUp) {
  constexpr ModelGeneration first;
  EXPECT_EQ(first.value(), 0u);
  EXPECT_EQ(first.next().value(), 1u);
  EXPECT_EQ(first.next().next(), ModelGeneration(2));
  EXPECT_NE(first, first.next());
}

// The env's generations are read by other threads while they advance: every advance counts.
TEST(GenerationId, AdvanceCountsEveryConcurrentStep) {
  std::atomic<PluginGeneration> generation{};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) advance(generation);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(generation.load(), PluginGeneration(4000));
  EXPECT_EQ(advance(generation), PluginGeneration(4001));
}

}  // namespace
}  // namespace mjfast
