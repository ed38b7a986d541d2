// A native plugin that publishes through the host services' publish (tests/test_native_publish.py):
// every field type of mjfast_message_field, on a configured topic, from last_stage or call().
#include <cstdint>
#include <mjfast/plugin.hpp>
#include <string>
#include <vector>

namespace {

// Publishes on `topic` (default "~out") every `every` steps (default 1) in last_stage:
// {time, step: int, label: str, matrix: float64 2x3, ranges: float32 [3], ids: int32 [3],
//  empty: float64 [0 x 3]}; `matrix` and `ranges` hold the step number.
// call("publish", topic) publishes the same from outside a callback; call("malformed", what)
// publishes a message with a broken field (what: "type", "ndim", "shape", "key", "data").
class Publisher final : public mjfast::Plugin {
 public:
  explicit Publisher(const mjfast::PluginContext& context)
      : Plugin(context),
        topic_(config().string("topic", "~out")),
        every_(config().integer("every", 1)) {}

  bool load(const mjModel*, mjData*) override { return true; }
  void last_stage(const mjModel*, mjData* d) override {
    ++steps_;
    if (steps_ % every_ == 0) send(topic_, d->time);
  }
  std::string call(const std::string& command, const std::string& argument) override {
    if (command == "publish") {
      send(argument, -1.0);
      return "";
    }
    if (command == "malformed") {
      mjfast_message_field field{};
      const double value = 1.0;
      field.key = "bad";
      field.type = MJFAST_FIELD_FLOAT64;
      field.ndim = 1;
      field.shape[0] = 1;
      field.data = &value;
      if (argument == "type") field.type = 99;
      if (argument == "ndim") field.ndim = MJFAST_FIELD_MAX_DIMS + 1;
      if (argument == "shape") field.shape[0] = -2;
      if (argument == "key") field.key = nullptr;
      if (argument == "data") field.data = nullptr;
      // The raw C table: mjfast::Message cannot build a malformed field.
      mjfast_error error{};
      const int status = host_api()->publish(host_context(), "~out", &field, 1, &error);
      return std::to_string(status) + " " + error.message;
    }
    return Plugin::call(command, argument);
  }

 private:
  void send(const std::string& topic, double time) {
    const double step = static_cast<double>(steps_);
    matrix_.assign(6, step);
    ranges_.assign(3, static_cast<float>(step));
    const std::int32_t ids[3] = {7, -8, 9};
    mjfast::Message message;
    message.scalar("time", time)
        .integer("step", steps_)
        .string("label", name() + " says hi")
        .array("matrix", matrix_.data(), {2, 3})
        .array("ranges", ranges_.data(), {3})
        .array("ids", ids, {3})
        .array("empty", static_cast<const double*>(nullptr), {0, 3});
    publish(topic, message);
  }
  std::string topic_;
  int every_;
  std::int64_t steps_ = 0;
  std::vector<double> matrix_;
  std::vector<float> ranges_;
};

}  // namespace

MJFAST_PLUGIN(Publisher)
