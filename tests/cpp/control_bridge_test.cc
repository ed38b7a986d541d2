#include "control/control_bridge.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"
#include "test_model.h"

namespace mjfast {
namespace {

// Indices into the field tables, by name: the tests read as the user's dicts do.
template <std::size_t N>
std::size_t field(const DataField (&table)[N], const std::string& name) {
  for (std::size_t i = 0; i < N; ++i) {
    if (name == table[i].name) return i;
  }
  ADD_FAILURE() << "no field " << name;
  return 0;
}
std::size_t state(const std::string& name) { return field(kStateFields, name); }
std::size_t command(const std::string& name) { return field(kCommandFields, name); }

// An update_read / update_write plugin whose body the test gives.
class ControlAdapter : public IPluginAdapter {
 public:
  using Body = std::function<void(mjData*)>;
  ControlAdapter(Body read, Body write) : read_(std::move(read)), write_(std::move(write)) {}
  bool load(const mjModel*, mjData*) override { return true; }
  CallbackMask callbacks() override {
    return (read_ ? mask_of(Callback::kUpdateRead) : 0) |
           (write_ ? mask_of(Callback::kUpdateWrite) : 0);
  }
  void update_read(const mjModel*, mjData* d) override { read_(d); }
  void update_write(const mjModel*, mjData* d) override { write_(d); }

 private:
  Body read_;
  Body write_;
};

class ControlBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    live->qpos[0] = 0.25;
    mj_forward(model.get(), live.get());
    bridge.rebind(model.get(), scratch.get(), live.get());
  }

  // Loads one control plugin into `host`.
  void load_plugin(ControlAdapter::Body read, ControlAdapter::Body write) {
    host.set_factory([read, write](ModelGeneration, PluginGeneration) {
      std::vector<FactoryEntry> entries;
      entries.push_back(
          {"control", "test/Control", std::make_unique<ControlAdapter>(read, write), "", "", {}});
      return entries;
    });
    host.load_generation(kGeneration, PluginGeneration(1));
  }

  // One step of the physics side as EnvCore takes it: staged commands in, step, snapshot out.
  void physics_step() {
    bridge.apply_staged(live.get());
    mj_step(model.get(), live.get());
    bridge.publish(live.get());
  }

  Commands commands_with(const std::string& name, const mjtNum* values) {
    Commands commands{};
    commands[command(name)] = values;
    return commands;
  }

  static constexpr ModelGeneration kGeneration{1};
  test_models::ModelPtr model = test_models::compile();
  test_models::DataPtr live = test_models::make_data(model.get());
  test_models::DataPtr scratch = test_models::make_data(model.get());
  ControlBridge bridge;
  PluginHost host;
};

TEST_F(ControlBridgeTest, FieldTablesSizeEachArrayFromTheModel) {
  EXPECT_EQ(kStateFields[state("qpos")].size(model.get()), model->nq);
  EXPECT_EQ(kStateFields[state("sensordata")].size(model.get()), model->nsensordata);
  EXPECT_EQ(kCommandFields[command("xfrc_applied")].size(model.get()), model->nbody * 6);
  EXPECT_EQ(kStateFieldCount, 6u);
  EXPECT_EQ(kCommandFieldCount, 3u);
}

TEST_F(ControlBridgeTest, SnapshotsArePublishedOnlyOnceArmedAndReadTheNewestStep) {
  EXPECT_FALSE(bridge.armed());
  physics_step();  // nobody controls the env yet: nothing is published
  bridge.arm(live.get());
  ControlStateView view = bridge.read_locked(nullptr, kGeneration);
  EXPECT_DOUBLE_EQ(view.time, live->time);
  EXPECT_DOUBLE_EQ(view.fields[state("qpos")][0], live->qpos[0]);
  EXPECT_DOUBLE_EQ(view.fields[state("sensordata")][0], live->sensordata[0]);
  physics_step();
  physics_step();
  view = bridge.read_locked(nullptr, kGeneration);
  EXPECT_DOUBLE_EQ(view.time, live->time);
  EXPECT_DOUBLE_EQ(view.time, 3 * model->opt.timestep);
  EXPECT_DOUBLE_EQ(view.fields[state("qvel")][0], live->qvel[0]);
}

TEST_F(ControlBridgeTest, StagedCommandsReachTheDataAtTheNextStepOnlyAndOnlyTheWrittenOnes) {
  bridge.arm(live.get());
  live->qfrc_applied[0] = 5.0;  // its owner's: never written through the bridge
  const mjtNum ctrl[] = {1.5};
  bridge.write_locked(commands_with("ctrl", ctrl), nullptr, kGeneration);
  EXPECT_EQ(live->ctrl[0], 0.0);  // staged, not applied
  physics_step();
  EXPECT_EQ(live->ctrl[0], 1.5);
  EXPECT_EQ(live->qfrc_applied[0], 5.0);
  EXPECT_DOUBLE_EQ(bridge.read_locked(nullptr, kGeneration).fields[state("ctrl")][0], 1.5);
}

TEST_F(ControlBridgeTest, ClearDropsWhatWasStaged) {
  bridge.arm(live.get());
  const mjtNum ctrl[] = {2.0};
  bridge.write_locked(commands_with("ctrl", ctrl), nullptr, kGeneration);
  live->time = 0.0;  // a reset
  bridge.clear(live.get());
  physics_step();
  EXPECT_EQ(live->ctrl[0], 0.0);
}

TEST_F(ControlBridgeTest, UpdateReadPluginsShapeWhatIsReadOnTheScratchData) {
  load_plugin([](mjData* d) { d->qpos[0] += 1.0; }, nullptr);
  bridge.arm(live.get());
  const double raw = live->qpos[0];
  EXPECT_DOUBLE_EQ(bridge.read_locked(&host, kGeneration).fields[state("qpos")][0], raw + 1.0);
  EXPECT_DOUBLE_EQ(bridge.read_locked(nullptr, kGeneration).fields[state("qpos")][0], raw);
  EXPECT_DOUBLE_EQ(live->qpos[0], raw);  // the live data is never theirs
}

TEST_F(ControlBridgeTest, UpdateWritePluginsMayRewriteCommandsAndAFailureStagesNothing) {
  bool fail = false;
  load_plugin(nullptr, [&](mjData* d) {
    if (fail) throw std::runtime_error("write refused");
    d->ctrl[0] *= 2;  // a rewrite: a command from now on
  });
  bridge.arm(live.get());
  const mjtNum ctrl[] = {1.0};
  bridge.write_locked(commands_with("ctrl", ctrl), &host, kGeneration);
  physics_step();
  EXPECT_EQ(live->ctrl[0], 2.0);

  fail = true;
  const mjtNum refused[] = {7.0};
  EXPECT_THROW(bridge.write_locked(commands_with("ctrl", refused), &host, kGeneration),
               PluginDispatchError);
  physics_step();
  EXPECT_EQ(live->ctrl[0], 2.0);  // nothing staged
  // The refused command is not remembered either: the next write carries the last good one.
  const mjtNum force[] = {0.5};
  bridge.write_locked(commands_with("qfrc_applied", force), nullptr, kGeneration);
  physics_step();
  EXPECT_EQ(live->qfrc_applied[0], 0.5);
  EXPECT_EQ(live->ctrl[0], 2.0);
}

TEST_F(ControlBridgeTest, ARebindSizesTheBuffersForTheNewModel) {
  test_models::ModelPtr bigger = test_models::compile(R"(
<mujoco>
  <worldbody>
    <body><joint name="a" type="hinge"/><geom size="0.1"/></body>
    <body pos="1 0 0"><joint name="b" type="slide"/><geom size="0.1"/></body>
  </worldbody>
  <actuator><motor joint="a"/><motor joint="b"/></actuator>
</mujoco>)");
  ASSERT_EQ(bigger->nu, 2);
  test_models::DataPtr bigger_live = test_models::make_data(bigger.get());
  test_models::DataPtr bigger_scratch = test_models::make_data(bigger.get());
  bridge.rebind(bigger.get(), bigger_scratch.get(), bigger_live.get());
  bridge.arm(bigger_live.get());
  const mjtNum ctrl[] = {1.0, -1.0};
  bridge.write_locked(commands_with("ctrl", ctrl), nullptr, kGeneration);
  bridge.apply_staged(bigger_live.get());
  EXPECT_EQ(bigger_live->ctrl[0], 1.0);
  EXPECT_EQ(bigger_live->ctrl[1], -1.0);
  EXPECT_EQ(bridge.model(), bigger.get());
}

}  // namespace
}  // namespace mjfast
