// SimulationRequests: what a plugin may ask of the env that runs it without calling it (SPEC §13,
// native host services): pause the physics thread, or reset the world. Requests never block and
// may come from any callback on any thread; the env honours them at its next step boundary.
// EnvCore implements it. It knows nothing of plugins or Python.
//
// A native plugin's host services find their env through CreationScope: the env holds one while
// it creates a plugin generation on its thread (the factory runs inside), so the services built
// for that generation capture that env, weakly.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace mjfast {

class SimulationRequests {
 public:
  virtual ~SimulationRequests() = default;
  // Pauses the physics thread before its next step (as env.pause() would).
  virtual void request_pause() = 0;
  // Resets the world (as env.reset(keyframe) would) before the next step, whoever steps.
  virtual void request_reset(std::optional<std::string> keyframe) = 0;

  class CreationScope {
   public:
    explicit CreationScope(std::weak_ptr<SimulationRequests> target)
        : previous_(std::exchange(current_slot(), std::move(target))) {}
    ~CreationScope() { current_slot() = std::move(previous_); }
    CreationScope(const CreationScope&) = delete;
    CreationScope& operator=(const CreationScope&) = delete;

   private:
    std::weak_ptr<SimulationRequests> previous_;
  };
  // The env creating plugins on this thread (expired outside a CreationScope).
  static std::weak_ptr<SimulationRequests> current() { return current_slot(); }

 private:
  static std::weak_ptr<SimulationRequests>& current_slot() {
    static thread_local std::weak_ptr<SimulationRequests> slot;
    return slot;
  }
};

}  // namespace mjfast
