// Generation counters. A model generation and a plugin generation are distinct types, so that one
// can never be compared with or passed as the other by mistake.
#pragma once

#include <atomic>
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

// Advances a generation that other threads read, by one; returns the new one.
template <class Tag>
GenerationId<Tag> advance(std::atomic<GenerationId<Tag>>& generation) {
  GenerationId<Tag> current = generation.load(std::memory_order_relaxed);
  while (!generation.compare_exchange_weak(current, current.next(), std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
  }
  return current.next();
}

}  // namespace mjfast
