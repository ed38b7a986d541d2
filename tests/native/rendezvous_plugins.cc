// A native plugin whose pre_step waits for the pre_steps of other envs
// (tests/test_parallel_envs.py): the meeting can only happen while several envs are inside mj_step
// at the same time, which is what shows that stepping holds no GIL (a Python thread holding it
// would keep the others out).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mjfast/plugin.hpp>
#include <mutex>
#include <stdexcept>
#include <string>

namespace {

// A reusable barrier of `parties` arrivals whose wait is bounded: a party that times out
// withdraws its arrival and reports, so a test fails instead of hanging.
class Meeting {
 public:
  explicit Meeting(long parties) : parties_(parties) {}

  long parties() const { return parties_; }

  // True once all parties arrived; false after `timeout` (the arrival is withdrawn).
  bool arrive_and_wait(std::chrono::duration<double> timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    const long round = round_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++round_;
      all_arrived_.notify_all();
      return true;
    }
    if (all_arrived_.wait_for(lock, timeout, [&] { return round_ != round; })) return true;
    --arrived_;
    return false;
  }

 private:
  const long parties_;
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  long arrived_ = 0;
  long round_ = 0;
};

std::mutex meetings_mutex;
std::map<std::string, std::shared_ptr<Meeting>> meetings;  // by group name

std::shared_ptr<Meeting> meeting_of(const std::string& group, long parties) {
  std::lock_guard<std::mutex> lock(meetings_mutex);
  auto& meeting = meetings[group];
  if (!meeting) meeting = std::make_shared<Meeting>(parties);
  if (meeting->parties() != parties) {
    throw std::invalid_argument("rendezvous group '" + group + "' already has " +
                                std::to_string(meeting->parties()) + " parties, not " +
                                std::to_string(parties));
  }
  return meeting;
}

// Its first `meetings` pre_steps each wait (at most `timeout_s` seconds) for the pre_steps of the
// other `parties` - 1 Rendezvous plugins of the same `group`; later pre_steps pass straight
// through. A wait that times out throws (the step raises PluginError naming the plugin).
// call("met") reports how many meetings happened.
class Rendezvous final : public mjfast::Plugin {
 public:
  explicit Rendezvous(const mjfast::PluginContext& context)
      : Plugin(context),
        meeting_(meeting_of(config().string("group"), config().integer("parties", 2))),
        meetings_(config().integer("meetings", 100)),
        timeout_(config().number("timeout_s", 10.0)) {}
  bool load(const mjModel*, mjData*) override { return true; }
  void pre_step(const mjModel*, mjData*) override {
    if (met_ >= meetings_) return;
    if (!meeting_->arrive_and_wait(timeout_)) {
      throw std::runtime_error("rendezvous " + std::to_string(met_.load() + 1) +
                               " timed out: no other env was inside mj_step at the same time");
    }
    ++met_;
  }
  std::string call(const std::string& command, const std::string& argument) override {
    if (command == "met") return std::to_string(met_.load());
    return Plugin::call(command, argument);
  }

 private:
  std::shared_ptr<Meeting> meeting_;
  long meetings_;
  std::chrono::duration<double> timeout_;
  std::atomic<long> met_{0};  // call() reads it from another thread
};

}  // namespace

MJFAST_PLUGIN(Rendezvous)
