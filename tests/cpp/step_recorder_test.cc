#include "record/step_recorder.h"

#include <gtest/gtest.h>
#include <mujoco/mujoco.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "control/control_bridge.h"

namespace mjfast {
namespace {

// One hinge and one motor; MuJoCo loads it from an in-memory file system.
struct Hinge {
  mjModel* model = nullptr;
  mjData* data = nullptr;
  Hinge() {
    static const char kXml[] =
        "<mujoco><option timestep='0.002'/><worldbody><body><joint name='j'/>"
        "<geom size='0.1'/></body></worldbody><actuator><motor joint='j'/></actuator></mujoco>";
    mjVFS vfs;
    mj_defaultVFS(&vfs);
    mj_addBufferVFS(&vfs, "hinge.xml", kXml, sizeof(kXml) - 1);
    char error[256] = "";
    model = mj_loadXML("hinge.xml", &vfs, error, sizeof(error));
    mj_deleteVFS(&vfs);
    EXPECT_NE(model, nullptr) << error;
    data = mj_makeData(model);
  }
  ~Hinge() {
    mj_deleteData(data);
    mj_deleteModel(model);
  }
  // What a step leaves for the recorder: time advanced, one distinctive value in qpos.
  void step(StepRecorder& recorder, std::uint64_t count) {
    data->time += model->opt.timestep;
    data->qpos[0] = static_cast<double>(count);
    recorder.after_step(model, data, count, 1);
  }
};

TEST(StepRecorder, TakesAStateEveryNStepsWithItsPhysics) {
  Hinge hinge;
  StepRecorder recorder(16, 5, 0.0);
  recorder.begin(hinge.model, hinge.data);
  for (std::uint64_t i = 1; i <= 12; ++i) hinge.step(recorder, i);
  EXPECT_EQ(recorder.steps(), 12u);
  std::vector<StepRecorder::Entry> out;
  ASSERT_EQ(recorder.drain(out), 2u);
  EXPECT_EQ(out[0].step, 5u);
  EXPECT_EQ(out[1].step, 10u);
  EXPECT_EQ(out[1].step_count, 10u);
  const auto size = static_cast<std::size_t>(mj_stateSize(hinge.model, mjSTATE_INTEGRATION));
  ASSERT_EQ(out[1].values.size(), size);
  std::vector<double> expected(size);
  hinge.data->time = out[1].time;
  hinge.data->qpos[0] = 10.0;
  mj_getState(hinge.model, hinge.data, expected.data(), mjSTATE_INTEGRATION);
  EXPECT_EQ(out[1].values, expected);
  EXPECT_EQ(recorder.drain(out), 0u);  // nothing new
}

TEST(StepRecorder, AFullRingDropsAndCountsNewEntriesKeepingTheOldest) {
  Hinge hinge;
  StepRecorder recorder(2, 1, 0.0);
  recorder.begin(hinge.model, hinge.data);
  for (std::uint64_t i = 1; i <= 5; ++i) hinge.step(recorder, i);
  EXPECT_EQ(recorder.dropped(), 3u);
  std::vector<StepRecorder::Entry> out;
  ASSERT_EQ(recorder.drain(out), 2u);
  EXPECT_EQ(out[0].step, 1u);
  EXPECT_EQ(out[1].step, 2u);
  hinge.step(recorder, 6);  // room again
  ASSERT_EQ(recorder.drain(out), 1u);
  EXPECT_EQ(out[0].step, 6u);
}

TEST(StepRecorder, AFullRingThatWaitsHoldsTheSteppingThreadUntilTheWriterDrains) {
  Hinge hinge;
  StepRecorder recorder(2, 1, 0.0, false, /*wait_when_full=*/true);
  recorder.begin(hinge.model, hinge.data);
  // The stepping thread takes 10 states into a ring of 2: it waits whenever the ring is full,
  // and the writer's drains let it go on; nothing is dropped.
  std::thread stepping([&] {
    for (std::uint64_t i = 1; i <= 10; ++i) hinge.step(recorder, i);
  });
  // Its third state found the ring full: it waits (counted) from there until the first drain.
  while (recorder.steps() < 3) std::this_thread::yield();
  std::vector<StepRecorder::Entry> out;
  std::vector<std::uint64_t> steps;
  while (steps.size() < 10) {
    const std::size_t count = recorder.drain(out);
    for (std::size_t i = 0; i < count; ++i) steps.push_back(out[i].step);
    std::this_thread::yield();
  }
  stepping.join();
  EXPECT_EQ(steps, (std::vector<std::uint64_t>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(recorder.dropped(), 0u);
  EXPECT_GE(recorder.waits(), 1u);
}

TEST(StepRecorder, CloseLetsAWaitingSteppingThreadGoOn) {
  Hinge hinge;
  StepRecorder recorder(1, 1, 0.0, false, /*wait_when_full=*/true);
  recorder.begin(hinge.model, hinge.data);
  hinge.step(recorder, 1);
  std::thread stepping([&] { hinge.step(recorder, 2); });  // waits: the ring is full
  recorder.close();
  stepping.join();
  EXPECT_EQ(recorder.dropped(), 1u);
}

TEST(StepRecorder, ASimulatedPeriodCountsTimeThatFallsARoundingErrorShort) {
  Hinge hinge;
  StepRecorder recorder(16, 0, 1.0);
  recorder.begin(hinge.model, hinge.data);
  // 500 steps of 2 ms sum to 0.99999999999999... in floating point: still the 1 s state.
  for (std::uint64_t i = 1; i <= 1100; ++i) hinge.step(recorder, i);
  std::vector<StepRecorder::Entry> out;
  ASSERT_EQ(recorder.drain(out), 2u);
  EXPECT_EQ(out[0].step, 500u);
  EXPECT_EQ(out[1].step, 1000u);
  // Time going back (a reset) restarts the schedule from there.
  hinge.data->time = 0.0;
  for (std::uint64_t i = 1; i <= 600; ++i) hinge.step(recorder, i);
  ASSERT_EQ(recorder.drain(out), 1u);
  EXPECT_EQ(out[0].step_count, 500u);
}

TEST(StepRecorder, CopiesTheCommandFieldsThatWereApplied) {
  Hinge hinge;
  StepRecorder recorder(4, 0, 0.0);
  recorder.begin(hinge.model, hinge.data);
  hinge.step(recorder, 1);
  hinge.data->ctrl[0] = 0.25;
  hinge.data->qfrc_applied[0] = -3.0;
  recorder.commands_applied(hinge.model, hinge.data, 0b011, 1);  // ctrl and qfrc_applied
  std::vector<StepRecorder::Entry> out;
  ASSERT_EQ(recorder.drain(out), 1u);
  EXPECT_EQ(out[0].kind, StepRecorder::Kind::kCommands);
  EXPECT_EQ(out[0].step, 1u);  // takes effect in the step after the first
  EXPECT_EQ(out[0].fields, 0b011u);
  EXPECT_EQ(out[0].values, (std::vector<double>{0.25, -3.0}));
}

}  // namespace
}  // namespace mjfast
