#include "plugin_host/plugin_host.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.h"

namespace mjfast {
namespace {

// A plugin that records what the host does to it, and fails where it is told to.
struct Script {
  bool load_returns = true;
  bool load_throws = false;
  bool load_interrupts = false;
  bool statistics_throws = false;
  bool statistics_interrupts = false;
  bool activate_returns = true;
  bool activate_interrupts = false;
  bool control_throws = false;
  bool control_interrupts = false;
  bool stateful = false;  // has get_state/set_state; set_state refuses "refuse"
};

class FakeAdapter : public IPluginAdapter {
 public:
  FakeAdapter(std::string name, Script script, std::vector<std::string>& journal)
      : name_(std::move(name)), script_(script), journal_(journal) {}

  bool load(const mjModel*, mjData*) override {
    journal_.push_back(name_ + ".load");
    if (script_.load_interrupts) throw Interrupted(nullptr);
    if (script_.load_throws) throw std::runtime_error("load exploded");
    return script_.load_returns;
  }
  CallbackMask callbacks() override {
    return mask_of(Callback::kControl) | mask_of(Callback::kRender);
  }
  std::map<std::string, double> statistics() override {
    journal_.push_back(name_ + ".statistics");
    if (script_.statistics_interrupts) throw Interrupted(nullptr);
    if (script_.statistics_throws) throw std::runtime_error("statistics exploded");
    return {{"loaded", 1.0}};
  }
  bool activate() override {
    journal_.push_back(name_ + ".activate");
    if (script_.activate_interrupts) throw Interrupted(nullptr);
    return script_.activate_returns;
  }
  void control(const mjModel*, mjData*) override {
    journal_.push_back(name_ + ".control");
    if (script_.control_interrupts) throw Interrupted(nullptr);
    if (script_.control_throws) throw std::runtime_error("control exploded");
  }
  void render(const mjModel*, mjData*, mjvScene*) override {
    journal_.push_back(name_ + ".render");
  }
  void unload() override { journal_.push_back(name_ + ".unload"); }
  const char* name_of(Callback callback) const override { return callback_name(callback); }
  bool has_state() const override { return script_.stateful; }
  std::string get_state() override { return value; }
  void set_state(const std::string& state) override {
    journal_.push_back(name_ + ".set_state(" + state + ")");
    if (state == "refuse") throw std::invalid_argument("not that one");
    value = state;
  }

  std::string value = "initial";

 private:
  std::string name_;
  Script script_;
  std::vector<std::string>& journal_;
};

class PluginHostTest : public ::testing::Test {
 protected:
  // Configures the host's factory to make one adapter per (name, script), in that order.
  void configure(std::vector<std::pair<std::string, Script>> plugins) {
    host.set_factory([this, plugins](ModelGeneration, PluginGeneration) {
      std::vector<FactoryEntry> entries;
      for (const auto& [name, script] : plugins) {
        entries.push_back(
            {name, "test/Fake", std::make_unique<FakeAdapter>(name, script, journal), "", "", {}});
      }
      return entries;
    });
  }

  PluginReport report_of(const std::string& name) const {
    for (const PluginReport& report : host.report()) {
      if (report.name == name) return report;
    }
    ADD_FAILURE() << "no plugin " << name;
    return {};
  }
  PluginState state_of(const std::string& name) const { return report_of(name).state; }

  std::vector<std::string> journal;
  PluginHost host;
  const ModelGeneration model_generation{1};
};

TEST_F(PluginHostTest, ALoadFailureIsIsolatedAndTheOthersDispatchInLoadOrder) {
  Script refuses;
  refuses.load_returns = false;
  Script throws;
  throws.load_throws = true;
  configure({{"a", {}}, {"refuses", refuses}, {"throws", throws}, {"b", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  EXPECT_EQ(state_of("a"), PluginState::kActive);
  EXPECT_EQ(state_of("refuses"), PluginState::kFailed);
  EXPECT_EQ(state_of("throws"), PluginState::kFailed);
  EXPECT_EQ(state_of("b"), PluginState::kActive);
  journal.clear();
  EXPECT_EQ(host.dispatch_control(model_generation, nullptr, nullptr), nullptr);
  EXPECT_EQ(journal, (std::vector<std::string>{"a.control", "b.control"}));
}

// Each load phase (load, statistics, activate) ends the same way: a failure is the plugin's,
// recorded with the phase; the user's interrupt leaves it unloaded (unload() called only where its
// load completed), the others load, and the first interrupt is raised once the generation is up.
TEST_F(PluginHostTest, EachLoadPhaseRecordsItsFailureWithThePhase) {
  Script statistics_throws;
  statistics_throws.statistics_throws = true;
  Script activate_refuses;
  activate_refuses.activate_returns = false;
  configure({{"statistics", statistics_throws}, {"activate", activate_refuses}, {"fine", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  // The failed ones were loaded, so they are unloaded; a statistics failure is not activated.
  EXPECT_EQ(journal, (std::vector<std::string>{
                         "statistics.load", "statistics.statistics", "activate.load",
                         "activate.statistics", "fine.load", "fine.statistics", "statistics.unload",
                         "activate.activate", "activate.unload", "fine.activate"}));
  const PluginReport statistics = report_of("statistics");
  EXPECT_EQ(statistics.state, PluginState::kFailed);
  ASSERT_TRUE(statistics.failure.has_value());
  EXPECT_EQ(statistics.failure->phase, "statistics");
  EXPECT_EQ(statistics.failure->message, "statistics exploded");
  EXPECT_EQ(statistics.callbacks, 0u);  // a plugin failed before activation dispatches nothing
  const PluginReport activate = report_of("activate");
  EXPECT_EQ(activate.state, PluginState::kFailed);
  ASSERT_TRUE(activate.failure.has_value());
  EXPECT_EQ(activate.failure->phase, "activate");
  EXPECT_EQ(activate.failure->message, "activate() returned false");
  EXPECT_EQ(state_of("fine"), PluginState::kActive);
}

TEST_F(PluginHostTest, AnInterruptedLoadPhaseLeavesThePluginUnloadedAndIsRaisedAfterTheOthers) {
  Script in_load;
  in_load.load_interrupts = true;
  Script in_statistics;
  in_statistics.statistics_interrupts = true;
  Script in_activate;
  in_activate.activate_interrupts = true;
  configure(
      {{"load", in_load}, {"statistics", in_statistics}, {"activate", in_activate}, {"fine", {}}});
  EXPECT_THROW(host.load_generation(model_generation, PluginGeneration(1)), Interrupted);
  // A plugin interrupted in load() was never loaded: no unload(). The others were.
  EXPECT_EQ(journal,
            (std::vector<std::string>{"load.load", "statistics.load", "statistics.statistics",
                                      "statistics.unload", "activate.load", "activate.statistics",
                                      "fine.load", "fine.statistics", "activate.activate",
                                      "activate.unload", "fine.activate"}));
  EXPECT_TRUE(host.generation_active());
  for (const char* name : {"load", "statistics", "activate"}) {
    const PluginReport report = report_of(name);
    EXPECT_EQ(report.state, PluginState::kUnloaded) << name;
    EXPECT_FALSE(report.failure.has_value()) << name;  // an interrupt is no failure
  }
  EXPECT_EQ(report_of("statistics").callbacks, 0u);
  EXPECT_EQ(state_of("fine"), PluginState::kActive);
  journal.clear();
  EXPECT_EQ(host.dispatch_control(model_generation, nullptr, nullptr), nullptr);
  EXPECT_EQ(journal, (std::vector<std::string>{"fine.control"}));
}

TEST_F(PluginHostTest, DispatchBoundTakesTheBoundCallbacksOnly) {
  configure({{"a", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  journal.clear();
  EXPECT_EQ(host.dispatch_bound(Callback::kControl, std::nullopt), nullptr);
  EXPECT_EQ(host.dispatch_bound(Callback::kRender, model_generation), nullptr);
  EXPECT_EQ(journal, (std::vector<std::string>{"a.control", "a.render"}));
  EXPECT_THROW(host.dispatch_bound(Callback::kReset, std::nullopt), std::invalid_argument);
  EXPECT_THROW(host.dispatch_bound(Callback::kUpdateRead, std::nullopt), std::invalid_argument);
  EXPECT_THROW(host.dispatch_bound(Callback::kControl, ModelGeneration(2)), StaleGenerationError);
  EXPECT_EQ(journal.size(), 2u);
}

TEST_F(PluginHostTest, AStaleTagRaisesAndNoActiveGenerationIsQuiet) {
  configure({{"a", {}}});
  EXPECT_EQ(host.dispatch_control(model_generation, nullptr, nullptr), nullptr);  // none yet
  host.load_generation(model_generation, PluginGeneration(1));
  EXPECT_THROW(host.dispatch_control(ModelGeneration(2), nullptr, nullptr), StaleGenerationError);
  host.quiesce_and_destroy();
  EXPECT_FALSE(host.generation_active());
  EXPECT_EQ(host.dispatch_control(ModelGeneration(2), nullptr, nullptr), nullptr);
  EXPECT_EQ(journal.back(), "a.unload");
}

TEST_F(PluginHostTest, APluginThatRaisesLiveIsFailedAndSkippedFromThenOn) {
  Script throws;
  throws.control_throws = true;
  configure({{"throws", throws}, {"after", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  journal.clear();
  DispatchError error = host.dispatch_control(model_generation, nullptr, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_THROW(std::rethrow_exception(error), PluginDispatchError);
  // The rest of that dispatch is skipped; from the next one, the failed plugin is.
  EXPECT_EQ(journal, (std::vector<std::string>{"throws.control"}));
  EXPECT_EQ(state_of("throws"), PluginState::kFailed);
  journal.clear();
  EXPECT_EQ(host.dispatch_control(model_generation, nullptr, nullptr), nullptr);
  EXPECT_EQ(journal, (std::vector<std::string>{"after.control"}));
}

TEST_F(PluginHostTest, AnInterruptIsPassedOnButIsNoFailure) {
  Script interrupts;
  interrupts.control_interrupts = true;
  configure({{"interrupted", interrupts}});
  host.load_generation(model_generation, PluginGeneration(1));
  DispatchError error = host.dispatch_control(model_generation, nullptr, nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_THROW(std::rethrow_exception(error), Interrupted);
  EXPECT_EQ(state_of("interrupted"), PluginState::kActive);
}

TEST_F(PluginHostTest, ANewGenerationUnloadsTheOldOneFirst) {
  configure({{"a", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  journal.clear();
  host.load_generation(ModelGeneration(2), PluginGeneration(2));
  EXPECT_EQ(journal,
            (std::vector<std::string>{"a.unload", "a.load", "a.statistics", "a.activate"}));
  EXPECT_EQ(host.plugin_generation(), PluginGeneration(2));
}

// ---- State (SPEC §20) ------------------------------------------------------------------------

TEST_F(PluginHostTest, StatesAreTheStatefulActivePluginsInLoadOrder) {
  Script stateful;
  stateful.stateful = true;
  Script fails;
  fails.stateful = true;
  fails.load_returns = false;
  configure({{"a", stateful}, {"plain", {}}, {"failed", fails}, {"b", stateful}});
  EXPECT_FALSE(host.has_stateful_plugins());
  host.load_generation(model_generation, PluginGeneration(1));
  EXPECT_TRUE(host.has_stateful_plugins());
  const std::vector<PluginStateEntry> states = host.get_states();
  ASSERT_EQ(states.size(), 2u);
  EXPECT_EQ(states[0].name, "a");
  EXPECT_EQ(states[1].name, "b");
  EXPECT_EQ(states[1].type, "test/Fake");
  EXPECT_EQ(states[1].value, "initial");
  host.quiesce_and_destroy();
  EXPECT_FALSE(host.has_stateful_plugins());
}

TEST_F(PluginHostTest, ASetStateThatThrowsPutsTheEarlierPluginsBack) {
  Script stateful;
  stateful.stateful = true;
  configure({{"a", stateful}, {"b", stateful}, {"c", stateful}});
  host.load_generation(model_generation, PluginGeneration(1));
  journal.clear();
  try {
    host.set_states(
        {{"a", "test/Fake", "A"}, {"b", "test/Fake", "B"}, {"c", "test/Fake", "refuse"}});
    FAIL() << "set_states should throw";
  } catch (const PluginDispatchError& error) {
    EXPECT_EQ(error.plugin_name, "c");
    EXPECT_EQ(error.callback, "set_state");
  }
  EXPECT_EQ(journal,
            (std::vector<std::string>{"a.set_state(A)", "b.set_state(B)", "c.set_state(refuse)",
                                      "a.set_state(initial)", "b.set_state(initial)"}));
  for (const PluginStateEntry& state : host.get_states()) EXPECT_EQ(state.value, "initial");
  EXPECT_EQ(state_of("c"), PluginState::kActive);  // refusing a state is no failure
}

TEST_F(PluginHostTest, SetStatesNeedsExactlyTheStatefulPlugins) {
  Script stateful;
  stateful.stateful = true;
  configure({{"a", stateful}, {"plain", {}}});
  host.load_generation(model_generation, PluginGeneration(1));
  journal.clear();
  EXPECT_THROW(host.set_states({}), std::invalid_argument);  // nothing for "a"
  EXPECT_THROW(host.set_states({{"a", "test/Fake", "x"}, {"plain", "test/Fake", "y"}}),
               std::invalid_argument);
  EXPECT_THROW(host.set_states({{"a", "test/Other", "x"}}), std::invalid_argument);
  EXPECT_THROW(host.set_states({{"a", "test/Fake", "x"}, {"a", "test/Fake", "y"}}),
               std::invalid_argument);
  EXPECT_TRUE(journal.empty());  // checked before anything was set
  host.set_states({{"a", "test/Fake", "x"}});
  EXPECT_EQ(host.get_states()[0].value, "x");
}

}  // namespace
}  // namespace mjfast
