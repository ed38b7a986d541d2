// StepObserver: what EnvCore calls at the end of a step, after the last_stage dispatch (the
// render turn of SPEC §5). The due time lets the stepping loop skip the call with one
// predictable comparison while nothing is due (it is +inf while no camera has frames enabled).
#pragma once

#include <atomic>
#include <exception>
#include <limits>

#include <mujoco/mujoco.h>

#include "generation.h"

namespace mjfast {

class StepObserver {
 public:
  virtual ~StepObserver() = default;

  // On the stepping thread, with the step lock held, when data->time >= next_due_time().
  // Returns the error to raise after the step (a render_callback's, an overflowing scene), if any.
  virtual std::exception_ptr after_step(const mjModel* model, mjData* data,
                                        ModelGeneration generation) = 0;

  double next_due_time() const { return next_due_time_.load(std::memory_order_relaxed); }

 protected:
  std::atomic<double> next_due_time_{std::numeric_limits<double>::infinity()};
};

}  // namespace mjfast
