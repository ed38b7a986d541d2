// DueWindow: the simulated times at which a rate plugin has nothing to do (SPEC §14's schedule:
// a publisher due at each multiple of 1/rate_hz), so that the stepping thread skips the plugin's
// Python last_stage_callback on the steps in between without taking the GIL for them. The plugin
// (mjfast.plugins._sensing.RatePublisher) sets the window at each due step, reset and state
// restore; the adapter asks not_due(d->time) before each call. An empty window (the default)
// makes every step due, and a NaN time is always due: the Python callback then decides, as it
// does with no window at all. Knows nothing of Python.
//
// Its mutex is a leaf of the lock order (env/env_core.h, 7): held to read or write two doubles.
#pragma once

#include <mutex>
#include <utility>

namespace mjfast {

class DueWindow {
 public:
  // True when `time` is in [low, high): the step has nothing due.
  bool not_due(double time) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return low_ <= time && time < high_;
  }

  void set(double low, double high) {
    std::lock_guard<std::mutex> lock(mutex_);
    low_ = low;
    high_ = high;
  }

  std::pair<double, double> get() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return {low_, high_};
  }

 private:
  mutable std::mutex mutex_;
  double low_ = 1.0;  // empty: every time is due
  double high_ = 0.0;
};

}  // namespace mjfast
