// VectorCore: the compiled half of VectorEnv (SPEC §21). It owns the worker pool and steps N
// worlds, each an EnvCore as MujocoEnv's, on it: step(n) runs every world's own EnvCore::step(n)
// on some worker (so each world's plugins, hooks and failure rules are exactly a MujocoEnv's), and
// the batched arrays are gathered from the worlds' data. It knows nothing of Python; the worlds
// are built (plugins loaded) by the Python façade, which hands their cores over.
//
// Its mutex_ is lock 0 of the one lock order (env_core.h): held for a whole step(n) across all
// worlds and for the façade's world operations (reset, state), so it is taken before any world's
// locks and never by a thread that holds one of them.
#pragma once

#include <mujoco/mujoco.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "env/env_core.h"
#include "vector/worker_pool.h"

namespace mjfast {

class VectorCore {
 public:
  // The per-world arrays that gather() collects, one row per world.
  enum class Field { kQpos, kQvel, kCtrl, kSensordata, kTime };

  // `worlds` are bound (model and data) and share the model's sizes; `threads` >= 1, capped at
  // the number of worlds (a worker more would never have a world to step).
  VectorCore(std::vector<std::shared_ptr<EnvCore>> worlds, int threads,
             WorkerPool::ThreadHooks hooks = {});
  ~VectorCore();
  VectorCore(const VectorCore&) = delete;
  VectorCore& operator=(const VectorCore&) = delete;

  std::size_t num_worlds() const { return worlds_.size(); }
  int threads() const { return pool_.size(); }
  EnvCore& world(std::size_t index) const { return *worlds_.at(index); }
  // Row length of `field` in world 0 (its model's nq, nv, nu, nsensordata; 1 for time). A spawn
  // or removal in one world (SPEC §25) can make the worlds' widths differ: step() and
  // gather_rows() check every world's under mutex_ against the width the caller sized for.
  std::size_t width(Field field) const;

  // Writes `ctrl` (num_worlds x ctrl_width doubles, row-major; null: none) into every world's
  // ctrl (std::invalid_argument, before anything is written, unless every world's nu is
  // ctrl_width), then
  // runs every world's EnvCore::step(n) on the pool, and returns when all have returned. A world
  // whose step raised (a plugin's error, a MuJoCo error) stops as a MujocoEnv's step(n) does; the
  // others run their n steps; then the error of the lowest such world is rethrown (a plugin's
  // before an interrupt) and failed_worlds() lists them. `interrupted` (null: none) is polled on
  // the calling thread while the workers step: once it returns an error, every world stops at its
  // next step boundary and Interrupted is thrown. A close() from another thread stops every world
  // at its next step boundary too (as EnvCore::close stops a step(n)), and std::logic_error("the
  // VectorEnv was closed during step()") is thrown. Refused (std::logic_error) once closed, from a
  // worker (a plugin of a world stepping the vector), where a world could not step from this
  // thread (EnvCore::check_can_step), and from inside a plugin callback while the vector is busy.
  void step(std::int64_t n, const double* ctrl, std::size_t ctrl_width,
            const EnvCore::InterruptPoll* interrupted);
  // The worlds whose last step() raised, in index order.
  std::vector<std::size_t> failed_worlds() const;

  // Copies `fields` of every world, one row per world with the fields side by side (an
  // observation of qpos and qvel: nq + nv doubles per row), into `out` (num_worlds x row_width
  // doubles), under mutex_; std::invalid_argument, before anything is copied, unless every
  // world's row is row_width long.
  void gather_rows(const Field* fields, std::size_t count, double* out, std::size_t row_width);

  // Holds the vector for a façade operation on its worlds (reset, set_state): no step runs
  // meanwhile. Refused as step() is (closed, a worker, busy from inside a plugin callback).
  std::unique_lock<std::mutex> hold(const char* what);

  // Ends the pool; a step in progress on another thread stops at its worlds' next step boundary
  // first (each world polls between its steps, every 20 ms at most). The worlds are the façade's to
  // close. Idempotent; refused as step() is (from a worker, from inside a plugin callback while
  // the vector is busy), and then nothing stops.
  void close();
  bool closed() const { return closed_.load(std::memory_order_acquire); }

 private:
  // Takes mutex_ for `what`, refused where waiting could deadlock (see step()); with
  // `refuse_closed`, a closed vector is refused too.
  std::unique_lock<std::mutex> lock(const char* what, bool refuse_closed = true);
  // std::invalid_argument naming the first world whose `fields` do not take `expected` numbers a
  // row. Under mutex_ (a spawn or removal in a world holds it).
  void check_widths(const Field* fields, std::size_t count, std::size_t expected) const;
  // What stops the worlds of a step in progress at their next boundary: close()'s error, else
  // the caller's interrupt (null: none).
  std::exception_ptr interrupt() const;

  // One world's part of step(): its ctrl row, then its EnvCore::step(n).
  void step_world(std::size_t index);
  // Between a world's steps (every 20 ms at most): a close() or the caller's interrupt; on the
  // calling thread (which steps worlds too), the caller's interrupt poll is asked here.
  std::exception_ptr poll_world();

  std::vector<std::shared_ptr<EnvCore>> worlds_;
  WorkerPool pool_;
  // The current step()'s arguments and each world's error, for step_task_ (made once: a step()
  // allocates nothing). Written by step() under mutex_ before the pool runs.
  std::int64_t step_n_ = 0;
  const double* step_ctrl_ = nullptr;
  const EnvCore::InterruptPoll* step_interrupted_ = nullptr;
  std::thread::id step_caller_;
  std::vector<std::exception_ptr> step_errors_;
  WorkerPool::Task step_task_;
  EnvCore::InterruptPoll world_poll_;
  std::mutex mutex_;
  std::vector<std::size_t> failed_;  // of the last step; under failed_mutex_ (a leaf)
  mutable std::mutex failed_mutex_;
  std::atomic<bool> interrupted_{false};
  std::exception_ptr interrupt_;  // written before interrupted_ is set, read after
  std::atomic<bool> closed_{false};
  // Set by close() before it waits for mutex_: a step in progress stops at its next boundary.
  std::atomic<bool> closing_{false};
  const std::exception_ptr closed_during_step_;
};

}  // namespace mjfast
