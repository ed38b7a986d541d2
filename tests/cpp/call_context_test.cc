// call_context: the one builder of every refusal message, and the thread's lifecycle marks.
#include "common/call_context.h"

#include <gtest/gtest.h>

#include <iterator>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

namespace mjfast::call_context {
namespace {

TEST(CallContextTest, EachRefusalNamesTheCallAndWhyItWouldDeadlock) {
  EXPECT_EQ(refusal(Refusal::kAcquireBlock, "close()"),
            "close() inside an acquire_plugin() block would deadlock: leave the block first");
  EXPECT_EQ(refusal(Refusal::kPluginCallback, "step()"),
            "step() called from inside a plugin callback");
  EXPECT_EQ(refusal(Refusal::kLifecycle, "env.reset()", "env.reload()"),
            "env.reset() called from inside env.reload() (a plugin's load/init, reset/on_reset or "
            "unload/cleanup calling back into the env) would recurse or deadlock");
  EXPECT_THROW(refuse(Refusal::kStepHold, "step()"), std::logic_error);
}

// The refusals that render_binding.cc, the physics thread, VectorCore, the camera opener and the
// host's Python dispatch used to word on their own: the same words, now from the one builder.
TEST(CallContextTest, TheRefusalsOnceWordedElsewhereKeepTheirWords) {
  EXPECT_EQ(refusal(Refusal::kRenderCallback, "loading the cameras"),
            "loading the cameras called from a render_callback would deadlock: the capture it "
            "runs in holds the cameras");
  EXPECT_EQ(refusal(Refusal::kPhysicsThread, "stop()"),
            "stop() called from a plugin callback on the physics thread");
  EXPECT_EQ(refusal(Refusal::kVectorOwnWorld, "VectorEnv.step()"),
            "VectorEnv.step() from inside a plugin callback of one of the VectorEnv's own worlds "
            "would deadlock");
  EXPECT_EQ(refusal(Refusal::kBusyVectorFromCallback, "VectorEnv.step()"),
            "VectorEnv.step() of a VectorEnv that is busy, from inside a plugin callback: waiting "
            "there could deadlock");
  EXPECT_EQ(refusal(Refusal::kCameraFromStep, "open_offscreen_camera()"),
            "open_offscreen_camera() called from a step callback: open cameras from load() (or "
            "outside callbacks)");
  EXPECT_EQ(refusal(Refusal::kPluginCallback, "host dispatch"),
            "host dispatch called from inside a plugin callback");
}

TEST(CallContextTest, EveryRefusalHasANameAndItsOwnMessage) {
  const char* names[] = {"plugin_callback",
                         "step_hold",
                         "acquire_block",
                         "control_plugins",
                         "state_call",
                         "simulation_control",
                         "own_callback",
                         "lifecycle",
                         "busy_env_from_callback",
                         "render_callback",
                         "acquire_from_callback",
                         "acquire_again",
                         "physics_thread",
                         "vector_own_world",
                         "busy_vector_from_callback",
                         "camera_from_step"};
  std::set<std::string> messages;
  for (const char* name : names) {
    const std::string message = refusal(refusal_named(name), "call()", "env.reload()");
    EXPECT_EQ(message.rfind("call()", 0), 0u) << name;
    EXPECT_EQ(message.find("refused"), std::string::npos) << name << ": no message of its own";
    messages.insert(message);
  }
  EXPECT_EQ(messages.size(), std::size(names));
}

TEST(CallContextTest, RefusalsAreNamedForPythonAndAnUnknownNameListsThem) {
  EXPECT_EQ(refusal_named("acquire_block"), Refusal::kAcquireBlock);
  try {
    refusal_named("acquire");
    FAIL() << "an unknown refusal name was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("acquire_block"), std::string::npos);
  }
}

TEST(CallContextTest, ALifecycleMarkRefusesAnotherOfTheSameEnvOnItsThreadOnly) {
  int env_a = 0;
  int env_b = 0;
  {
    const LifecycleMark reload(&env_a, "reload");
    ASSERT_NE(LifecycleMark::current(&env_a), nullptr);
    EXPECT_EQ(*LifecycleMark::current(&env_a), "reload");
    EXPECT_EQ(LifecycleMark::current(&env_b), nullptr);
    EXPECT_THROW(LifecycleMark(&env_a, "reset"), std::logic_error);
    const LifecycleMark other_env(&env_b, "reset");  // another env's lifecycle nests
    bool seen_elsewhere = true;
    std::thread([&] { seen_elsewhere = LifecycleMark::current(&env_a) != nullptr; }).join();
    EXPECT_FALSE(seen_elsewhere);
  }
  EXPECT_EQ(LifecycleMark::current(&env_a), nullptr);
  EXPECT_EQ(LifecycleMark::current(&env_b), nullptr);
}

TEST(CallContextTest, MarksEndingOutOfOrderLeaveTheOthers) {
  int env_a = 0;
  int env_b = 0;
  auto* first = new LifecycleMark(&env_a, "reload");
  const LifecycleMark second(&env_b, "reset");
  delete first;  // a Python caller's blocks need not end in order
  EXPECT_EQ(LifecycleMark::current(&env_a), nullptr);
  ASSERT_NE(LifecycleMark::current(&env_b), nullptr);
}

}  // namespace
}  // namespace mjfast::call_context
