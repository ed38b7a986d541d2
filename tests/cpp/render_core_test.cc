#include "render/render_core.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "env/env_core.h"
#include "render/camera_handle.h"
#include "render/frame_store.h"
#include "test_model.h"

namespace mjfast {
namespace {

// A red box on a green floor, lit, seen by the camera "front"; a hinge so that it moves.
constexpr const char* kCameraXml = R"(
<mujoco>
  <worldbody>
    <light pos="0 0 3"/>
    <camera name="front" pos="0 -1.2 0.4" xyaxes="1 0 0 0 0.3 1"/>
    <geom type="plane" size="2 2 0.1" rgba="0.2 0.6 0.2 1"/>
    <body pos="0 0 0.3">
      <joint type="hinge" axis="0 1 0"/>
      <geom type="box" size="0.15 0.15 0.15" rgba="0.9 0.1 0.1 1"/>
    </body>
  </worldbody>
</mujoco>)";

// The env's RenderCore, as the Python env drives it: a load opens the cameras pending and binds
// them at its end. render_sync, so that each render turn ends before the next step starts.
class RenderCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mjcb_control = &hooks::control_trampoline;
    mjcb_passive = &hooks::passive_trampoline;
    env->bind(model.get(), data.get(), scratch.get(), nullptr);
    render().begin_load(model.get(), env->model_generation());
  }
  void TearDown() override {
    env->close();  // retires the cameras, stops the render thread, drops the GL context
    mjcb_control = nullptr;
    mjcb_passive = nullptr;
  }

  RenderCore& render() { return env->render_core(); }

  // RenderCore::bind, which makes the render thread's GL context for the first camera; none
  // where no GL context can be made here (neither EGL nor OSMesa), with the reason in `no_gl`.
  std::optional<std::vector<std::string>> bind(const std::map<std::string, CameraConfig>& configs) {
    if (std::getenv("MUJOCO_GL") == nullptr) setenv("MUJOCO_GL", "egl", 0);
    try {
      return render().bind(configs);
    } catch (const std::runtime_error& error) {
      no_gl = error.what();
      return std::nullopt;
    }
  }
  std::string no_gl;

  static CameraConfig small_camera() {
    CameraConfig config;
    config.width = 64;
    config.height = 48;
    config.planes = {true, true, false};  // rgb and depth
    config.rate_hz = 100.0;
    return config;
  }

  test_models::ModelPtr model = test_models::compile(kCameraXml);
  test_models::DataPtr data = test_models::make_data(model.get());
  test_models::DataPtr scratch = test_models::make_data(model.get());
  std::shared_ptr<EnvCore> env = std::make_shared<EnvCore>(/*render_sync=*/true);
};

TEST_F(RenderCoreTest, BindsOnlyTheCamerasTheModelHas) {
  const auto front = render().open("front", small_camera());
  const auto ghost = render().open("ghost", small_camera());  // pending: checked at bind
  EXPECT_EQ(front->state(), CameraHandle::State::kPending);
  EXPECT_EQ(render().pending_names(), (std::vector<std::string>{"front", "ghost"}));
  const auto missing = bind({{"front", small_camera()}, {"ghost", small_camera()}});
  if (!missing) GTEST_SKIP() << "no headless GL context here: " << no_gl;
  EXPECT_EQ(*missing, std::vector<std::string>{"ghost"});
  EXPECT_EQ(front->state(), CameraHandle::State::kLive);
  EXPECT_EQ(ghost->state(), CameraHandle::State::kMissing);
  EXPECT_EQ(render().live_names(), std::vector<std::string>{"front"});
  // Loaded: a camera the model lacks is refused at once.
  EXPECT_THROW(render().open("ghost", small_camera()), std::invalid_argument);
  // A reload retires every handle, the missing ones too (the new model may have their camera);
  // the next load's bind brings back those it has.
  render().retire();
  EXPECT_EQ(front->state(), CameraHandle::State::kRetiring);
  EXPECT_EQ(ghost->state(), CameraHandle::State::kRetiring);
  render().begin_load(model.get(), env->model_generation());
  EXPECT_EQ(render().bind({{"front", small_camera()}}), std::vector<std::string>{"ghost"});
  EXPECT_EQ(front->state(), CameraHandle::State::kLive);
  EXPECT_EQ(ghost->state(), CameraHandle::State::kMissing);
}

TEST_F(RenderCoreTest, RendersADueCameraAtTheEndOfAStep) {
  const auto front = render().open("front", small_camera());
  if (!bind({{"front", small_camera()}})) GTEST_SKIP() << "no headless GL context here: " << no_gl;
  front->enable_frames();
  // 100 Hz at a 2 ms step: a capture every 5 steps; with render_sync each is rendered before the
  // next step starts, so the last one is done once a step follows it.
  env->step(12);
  const std::shared_ptr<const Frame> rgb = front->take_latest(Plane::kRgb);
  const std::shared_ptr<const Frame> depth = front->take_latest(Plane::kDepth);
  const RenderStatistics stats = render().statistics();
  EXPECT_EQ(stats.render_errors, 0u) << stats.render_error;
  EXPECT_GE(stats.captures, 2u);
  EXPECT_GE(stats.frames_rendered, 2u);
  EXPECT_FALSE(stats.backend.empty());
  ASSERT_NE(rgb, nullptr);
  ASSERT_NE(depth, nullptr);
  EXPECT_EQ(rgb->width, 64);
  EXPECT_EQ(rgb->height, 48);
  ASSERT_EQ(rgb->bytes.size(), 64u * 48u * 3u);
  EXPECT_EQ(rgb->frame_generation, env->model_generation());
  EXPECT_GT(rgb->simulation_time_ns, 0);
  // The red box and the green floor are both in view: red pixels and green pixels.
  int red = 0;
  int green = 0;
  for (std::size_t i = 0; i < rgb->bytes.size(); i += 3) {
    const int r = rgb->bytes[i], g = rgb->bytes[i + 1], b = rgb->bytes[i + 2];
    if (r > g + 40 && r > b + 40) ++red;
    if (g > r + 40 && g > b + 40) ++green;
  }
  EXPECT_GT(red, 20);
  EXPECT_GT(green, 20);
  // Depth in metres: the box is nearer than the far plane and further than the camera's lens.
  ASSERT_EQ(depth->bytes.size(), 64u * 48u * sizeof(float));
  const auto* metres = reinterpret_cast<const float*>(depth->bytes.data());
  const float centre = metres[24 * 64 + 32];
  EXPECT_TRUE(std::isfinite(centre));
  EXPECT_GT(centre, 0.5f);
  EXPECT_LT(centre, 2.0f);
  EXPECT_GE(front->statistics().frames_rendered, 2u);
}

}  // namespace
}  // namespace mjfast
