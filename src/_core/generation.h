// Generation counters. A model generation and a plugin generation are distinct types, so that one
// can never be compared with or passed as the other by mistake.
#pragma once

#include <cstdint>

namespace mjfast {

template <class Tag>
class GenerationId {
 public:
  constexpr GenerationId() = default;
  constexpr explicit GenerationId(std::uint64_t value) : value_(value) {}

  constexpr std::uint64_t value() const { return value_; }
  constexpr GenerationId next() const { return GenerationId(value_ + 1); }

  friend constexpr bool operator==(GenerationId a, GenerationId b) { return a.value_ == b.value_; }
  friend constexpr bool operator!=(GenerationId a, GenerationId b) { return a.value_ != b.value_; }

 private:
  std::uint64_t value_ = 0;
};

struct ModelGenerationTag {};
struct PluginGenerationTag {};
using ModelGeneration = GenerationId<ModelGenerationTag>;
using PluginGeneration = GenerationId<PluginGenerationTag>;

}  // namespace mjfast
