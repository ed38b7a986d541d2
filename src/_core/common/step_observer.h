// StepObserver: what EnvCore calls at the end of a step, after the last_stage dispatch (the
// render turn of SPEC §5). due() lets the stepping loop skip the call with one predictable
// comparison while nothing is due (the due time is +inf while no camera has frames enabled),
// plus one that notices simulated time moving back by any means (env.reset(), a user setting
// data.time, mj_resetData, a keyframe): the observer's schedule then restarts instead of waiting
// for time to catch up with it.
#pragma once

#include <mujoco/mujoco.h>

#include <atomic>
#include <exception>
#include <limits>

#include "common/generation.h"

namespace mjfast {

class StepObserver {
 public:
  virtual ~StepObserver() = default;

  // On the stepping thread, with the step lock held, when due(data->time).
  // Returns the error to raise after the step (a render_callback's, an overflowing scene), if any.
  virtual std::exception_ptr after_step(const mjModel* model, mjData* data,
                                        ModelGeneration generation) = 0;

  // Whether after_step must run at the end of a step that reached simulated `time`: time reached
  // the next due time, or went back past the time of the last call (time can only move back
  // between steps, so this fires once per jump). Both are false while nothing is scheduled.
  // Time was reset (env.reset(), a plugin's reset request): the schedule restarts from the new
  // time. With the stepping held, or on the stepping thread between steps.
  virtual void notify_time_reset() {}

  bool due(double time) const {
    return time >= next_due_time_.load(std::memory_order_relaxed) ||
           time < last_observed_time_.load(std::memory_order_relaxed);
  }

 protected:
  std::atomic<double> next_due_time_{std::numeric_limits<double>::infinity()};
  // The simulated time of the last after_step call; -inf while nothing is scheduled (or the
  // schedule was just restarted), so that the second comparison of due() never fires then.
  std::atomic<double> last_observed_time_{-std::numeric_limits<double>::infinity()};
};

}  // namespace mjfast
