#include "generation.h"

#include <gtest/gtest.h>

#include <type_traits>

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

}  // namespace
}  // namespace mjfast
