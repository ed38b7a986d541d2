// A native plugin that asks its env for a pause or a world reset through the host services'
// simulation requests (tests/test_sim_control_native.py), the way a safety monitor would.
#include <mjfast/plugin.hpp>
#include <string>

namespace {

// Counts its last_stage calls; at step `pause_at_step` it requests a pause, at `reset_at_step` a
// reset to `keyframe` (empty: the initial state); with `request_in` = "load" it requests the
// reset from load() instead. call("resets") / call("steps") / call("reset_time") report what it
// saw; call("request_pause") asks from outside a callback (refused nowhere: it is a request).
class SimRequester final : public mjfast::Plugin {
 public:
  explicit SimRequester(const mjfast::PluginContext& context)
      : Plugin(context),
        pause_at_(config().integer("pause_at_step", -1)),
        reset_at_(config().integer("reset_at_step", -1)),
        keyframe_(config().string("keyframe", "")),
        request_in_(config().string("request_in", "last_stage")) {}

  bool load(const mjModel*, mjData*) override {
    if (request_in_ == "load") request_reset_to_keyframe();
    return true;
  }
  void last_stage(const mjModel*, mjData*) override {
    ++steps_;
    if (steps_ == pause_at_) request_pause();
    if (steps_ == reset_at_) request_reset_to_keyframe();
  }
  void on_reset(const mjModel*, mjData* d) override {
    ++resets_;
    reset_time_ = d->time;
  }
  std::string call(const std::string& command, const std::string&) override {
    if (command == "resets") return std::to_string(resets_);
    if (command == "steps") return std::to_string(steps_);
    if (command == "reset_time") return std::to_string(reset_time_);
    if (command == "request_pause") {
      request_pause();
      return "ok";
    }
    return Plugin::call(command, "");
  }

 private:
  void request_reset_to_keyframe() {
    request_reset(keyframe_.empty() ? nullptr : keyframe_.c_str());
  }

  long pause_at_;
  long reset_at_;
  std::string keyframe_;
  std::string request_in_;
  long steps_ = 0;
  int resets_ = 0;
  double reset_time_ = -1.0;
};

}  // namespace

MJFAST_PLUGIN(SimRequester)
