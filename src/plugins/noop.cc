// mjfast/NoOp: overrides every callback and does nothing. The benchmark baseline: what it costs
// per step is the price of native dispatch itself. Configuration: none (any keys are ignored).
#include <mjfast/plugin.hpp>

namespace mjfast_plugins {

class NoOp final : public mjfast::Plugin {
 public:
  using Plugin::Plugin;
  bool load(const mjModel*, mjData*) override { return true; }
  void control(const mjModel*, mjData*) override {}
  void passive(const mjModel*, mjData*) override {}
  void render(const mjModel*, mjData*, mjvScene*) override {}
  void last_stage(const mjModel*, mjData*) override {}
  void geom_changed(const mjModel*, mjData*, int) override {}
  void reset() override {}
  void pre_step(const mjModel*, mjData*) override {}
  void update_read(const mjModel*, mjData*) override {}
  void update_write(const mjModel*, mjData*) override {}
  void on_reset(const mjModel*, mjData*) override {}
};

}  // namespace mjfast_plugins

using mjfast_plugins::NoOp;
MJFAST_PLUGIN(NoOp)
