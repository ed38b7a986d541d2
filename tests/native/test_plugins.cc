// Plugins for the native failure, ordering and reload tests.
#include <atomic>
#include <charconv>
#include <mjfast/plugin.hpp>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

namespace {

// load() returns false.
class LoadFalse final : public mjfast::Plugin {
 public:
  using Plugin::Plugin;
  bool load(const mjModel*, mjData*) override { return false; }
};

// The constructor throws.
class ThrowingCtor final : public mjfast::Plugin {
 public:
  explicit ThrowingCtor(const mjfast::PluginContext& context) : Plugin(context) {
    throw std::runtime_error("constructor exploded");
  }
  bool load(const mjModel*, mjData*) override { return true; }
};

// Reads typed configuration in its constructor: gains.kp (number) and label (string).
class Configured final : public mjfast::Plugin {
 public:
  explicit Configured(const mjfast::PluginContext& context)
      : Plugin(context),
        kp_(config().number("gains.kp")),
        label_(config().string("label", "none")),
        first_(config().at("list")[0].as_int()) {}
  bool load(const mjModel*, mjData*) override { return true; }
  std::string call(const std::string& command, const std::string&) override {
    if (command == "describe") {
      return std::to_string(kp_) + " " + label_ + " " + std::to_string(first_);
    }
    return Plugin::call(command, "");
  }

 private:
  double kp_;
  std::string label_;
  int first_;
};

// Echoes its configuration back through call(): "number"/"integer"/"string" with the key as the
// argument. With a `json` string key it parses that text as its configuration instead, so the
// tests can give the parser JSON that Python's json module never writes.
class ConfigEcho final : public mjfast::Plugin {
 public:
  explicit ConfigEcho(const mjfast::PluginContext& context)
      : Plugin(context),
        source_(config().has("json") ? mjfast::Config::parse(config().string("json")) : config()) {}
  bool load(const mjModel*, mjData*) override { return true; }
  std::string call(const std::string& command, const std::string& key) override {
    if (command == "number") {
      // Shortest round-trip text, independent of the locale (std::to_string is not).
      char buffer[64];
      const auto result = std::to_chars(buffer, buffer + sizeof(buffer), source_.number(key));
      return std::string(buffer, result.ptr);
    }
    if (command == "integer") return std::to_string(source_.integer(key));
    if (command == "string") return source_.string(key);
    return Plugin::call(command, key);
  }

 private:
  mjfast::Config source_;
};

// unload() throws.
class ThrowingUnload final : public mjfast::Plugin {
 public:
  using Plugin::Plugin;
  bool load(const mjModel*, mjData*) override { return true; }
  void unload() override { throw std::runtime_error("unload exploded"); }
};

// control() throws once `after` calls have run (default 0).
class ThrowingControl final : public mjfast::Plugin {
 public:
  explicit ThrowingControl(const mjfast::PluginContext& context)
      : Plugin(context), after_(config().integer("after", 0)) {}
  bool load(const mjModel*, mjData*) override { return true; }
  void control(const mjModel*, mjData*) override {
    if (calls_++ >= after_) throw std::runtime_error("control exploded");
  }

 private:
  int after_;
  int calls_ = 0;
};

// Appends its `tag` to the ordering log in userdata: userdata[0] counts the entries, the entries
// follow (the Python test plugins write the same log).
class Tagger final : public mjfast::Plugin {
 public:
  explicit Tagger(const mjfast::PluginContext& context)
      : Plugin(context), tag_(config().number("tag")) {}
  bool load(const mjModel* m, mjData*) override { return m->nuserdata > 1; }
  void control(const mjModel* m, mjData* d) override {
    const int n = static_cast<int>(d->userdata[0]);
    if (n + 1 < m->nuserdata) {
      d->userdata[1 + n] = tag_;
      d->userdata[0] = n + 1;
    }
  }

 private:
  double tag_;
};

// Checks that no callback reaches an instance after its unload: each instance registers its serial
// number while live; a callback on an unregistered instance counts as a violation.
std::mutex live_mutex;
std::set<long> live;
std::atomic<long> next_serial{0};
std::atomic<long> violations{0};
std::atomic<long> callbacks{0};

class Liveness final : public mjfast::Plugin {
 public:
  explicit Liveness(const mjfast::PluginContext& context)
      : Plugin(context), serial_(next_serial.fetch_add(1)) {}
  bool load(const mjModel*, mjData*) override {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.insert(serial_);
    return true;
  }
  void unload() override {
    std::lock_guard<std::mutex> lock(live_mutex);
    live.erase(serial_);
  }
  void control(const mjModel*, mjData*) override { check(); }
  void pre_step(const mjModel*, mjData*) override { check(); }
  void last_stage(const mjModel*, mjData*) override { check(); }
  std::string call(const std::string& command, const std::string&) override {
    if (command == "violations") return std::to_string(violations.load());
    if (command == "callbacks") return std::to_string(callbacks.load());
    if (command == "serial") return std::to_string(serial_);
    return Plugin::call(command, "");
  }

 private:
  void check() {
    callbacks.fetch_add(1);
    std::lock_guard<std::mutex> lock(live_mutex);
    if (live.count(serial_) == 0) violations.fetch_add(1);
  }
  long serial_;
};

// Knows its world (VectorEnv, SPEC section 21): remembers world_index() and the data it loaded
// with, counts its pre_step/control/last_stage calls, and counts a call with other data as a
// violation. call("world_index"), call("pre_step"|"control"|"last_stage"), call("violations").
class WorldProbe final : public mjfast::Plugin {
 public:
  explicit WorldProbe(const mjfast::PluginContext& context) : Plugin(context) {}
  bool load(const mjModel*, mjData* d) override {
    world_ = world_index();
    data_ = d;
    return true;
  }
  void pre_step(const mjModel*, mjData* d) override { count(d, pre_step_); }
  void control(const mjModel*, mjData* d) override { count(d, control_); }
  void last_stage(const mjModel*, mjData* d) override { count(d, last_stage_); }
  std::string call(const std::string& command, const std::string& argument) override {
    if (command == "world_index") return std::to_string(world_);
    if (command == "pre_step") return std::to_string(pre_step_);
    if (command == "control") return std::to_string(control_);
    if (command == "last_stage") return std::to_string(last_stage_);
    if (command == "violations") return std::to_string(violations_);
    return Plugin::call(command, argument);
  }

 private:
  void count(const mjData* d, long& calls) {
    ++calls;
    if (d != data_) ++violations_;
  }
  std::int64_t world_ = -1;
  const mjData* data_ = nullptr;
  long pre_step_ = 0, control_ = 0, last_stage_ = 0, violations_ = 0;
};

}  // namespace

MJFAST_PLUGIN(LoadFalse)
MJFAST_PLUGIN(ThrowingCtor)
MJFAST_PLUGIN(Configured)
MJFAST_PLUGIN(ConfigEcho)
MJFAST_PLUGIN(ThrowingUnload)
MJFAST_PLUGIN(ThrowingControl)
MJFAST_PLUGIN(Tagger)
MJFAST_PLUGIN(Liveness)
MJFAST_PLUGIN(WorldProbe)
