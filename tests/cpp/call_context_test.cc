// call_context: the one builder of every refusal message, and the thread's lifecycle marks.
#include "call_context.h"

#include <gtest/gtest.h>

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
