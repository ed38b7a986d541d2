// WorkerPool: a fixed set of threads, started once and joined by shutdown() or the destructor,
// that run one batch of tasks at a time: run(count, task) calls task(0) .. task(count - 1) on the
// workers (each takes the next index until none is left) and returns when all have returned. With
// `caller_helps`, the thread that calls run() is one of the pool's `threads` (it takes indices as
// a worker does, and a one-task batch runs on it alone, waking no one), so the pool starts one
// thread fewer. A worker spins briefly after a batch before it sleeps, and the caller before it
// waits, so that back-to-back batches hand over in a few microseconds. It knows nothing of Python
// or MuJoCo; VectorCore steps its worlds with it.
//
// Its one mutex is a leaf of the lock order (env_core.h): held to hand out a batch and to count
// its end, never while a task runs or while another lock is taken.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace mjfast {

class WorkerPool {
 public:
  // Called on each worker when it starts and before it ends (the bindings attach the thread to
  // Python there, so that a Python plugin's call only swaps the GIL).
  struct ThreadHooks {
    std::function<void()> on_start;
    std::function<void()> on_exit;
  };
  using Task = std::function<void(std::size_t)>;

  // `threads` >= 1 (std::invalid_argument otherwise): as many workers, started now, or with
  // `caller_helps` one fewer (the caller of run() is the other; the hooks run on the workers).
  explicit WorkerPool(int threads, ThreadHooks hooks = {}, bool caller_helps = false);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return threads_; }

  // Runs task(i) for every i < count on the workers and returns when all have returned; the first
  // exception a task threw (the lowest index's) is rethrown then. While it waits, the calling
  // thread calls `on_wait` (if set) every `poll_interval` (with `caller_helps`, once it has no
  // task left to take; is_worker() is true on it while it runs tasks). One batch at a time: a
  // run() from a worker of this pool, from inside a batch, or after shutdown() throws
  // std::logic_error; a second thread's run() waits for the first's to end. Allocates nothing
  // once a batch of `count` tasks has run.
  void run(std::size_t count, const Task& task, const std::function<void()>& on_wait = {},
           std::chrono::milliseconds poll_interval = std::chrono::milliseconds(20));

  // Whether the calling thread is one of this pool's workers (or the caller, inside a batch it
  // helps with).
  bool is_worker() const;
  bool caller_helps() const { return caller_helps_; }

  // Ends and joins the workers (after the batch in progress); idempotent. Refused from a worker.
  void shutdown();

 private:
  void work();
  // Runs the batch's tasks until none is left to take; `lock` holds mutex_ (released around
  // each task).
  void run_tasks(std::unique_lock<std::mutex>& lock);

  ThreadHooks hooks_;
  int threads_;
  const bool caller_helps_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;  // one run() at a time (taken before mutex_, never held by a worker)
  std::mutex mutex_;
  std::condition_variable wakeup_;  // workers: a batch or shutdown
  std::condition_variable done_;    // run(): the batch's last worker has finished
  // Under mutex_: the current batch, its id, how many of its tasks have not finished, its errors
  // (kept from one batch to the next: no allocation once it has been as large), who sleeps.
  const Task* task_ = nullptr;
  std::size_t count_ = 0;
  std::size_t next_ = 0;
  std::size_t unfinished_ = 0;
  std::vector<std::exception_ptr> errors_;
  bool any_error_ = false;
  int sleeping_workers_ = 0;
  bool caller_sleeping_ = false;
  bool stopping_ = false;
  // Written under mutex_, read without it by the spinning threads: the batch's id (workers: a
  // new batch, or stopping) and whether its tasks are all done (the caller).
  std::atomic<std::uint64_t> batch_{0};
  std::atomic<bool> batch_done_{true};
  std::atomic<bool> stopping_flag_{false};
};

}  // namespace mjfast
