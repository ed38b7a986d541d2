#include "vector/worker_pool.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"

namespace mjfast {
namespace {

// The pool whose worker the calling thread is (null elsewhere).
thread_local const WorkerPool* current_pool = nullptr;

}  // namespace

WorkerPool::WorkerPool(int threads, ThreadHooks hooks)
    : hooks_(std::move(hooks)), threads_(threads) {
  if (threads < 1) {
    throw std::invalid_argument("a worker pool needs at least one thread, got " +
                                std::to_string(threads));
  }
  workers_.reserve(static_cast<std::size_t>(threads));
  try {
    for (int i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  } catch (...) {
    shutdown();  // the threads that did start
    throw;
  }
}

WorkerPool::~WorkerPool() {
  try {
    shutdown();
  } catch (...) {
    // Only a worker destroying its own pool is refused; nothing to do but leave.
  }
}

bool WorkerPool::is_worker() const { return current_pool == this; }

void WorkerPool::work() {
  current_pool = this;
  if (hooks_.on_start) hooks_.on_start();
  std::uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    wakeup_.wait(lock, [&] { return stopping_ || batch_ != seen; });
    if (batch_ == seen) break;  // stopping, and no batch left to do
    seen = batch_;
    const Task* task = task_;
    while (next_ < count_) {
      const std::size_t index = next_++;
      lock.unlock();
      std::exception_ptr error;
      try {
        (*task)(index);
      }
      MJFAST_RETHROW_FORCED_UNWIND
      catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      if (error) errors_[index] = std::move(error);
    }
    if (--busy_ == 0) done_.notify_all();
  }
  lock.unlock();
  if (hooks_.on_exit) hooks_.on_exit();
  current_pool = nullptr;
}

void WorkerPool::run(std::size_t count, const Task& task, const std::function<void()>& on_wait,
                     std::chrono::milliseconds poll_interval) {
  if (is_worker()) {
    throw std::logic_error("a worker pool's run() from one of its own workers would deadlock");
  }
  std::lock_guard<std::mutex> running(run_mutex_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (stopping_) throw std::logic_error("run() on a worker pool that was shut down");
  if (count == 0) return;
  task_ = &task;
  count_ = count;
  next_ = 0;
  errors_.assign(count, nullptr);
  busy_ = size();
  ++batch_;
  wakeup_.notify_all();
  std::exception_ptr wait_error;
  while (busy_ > 0) {
    if (!on_wait || wait_error) {
      done_.wait(lock, [&] { return busy_ == 0; });
      break;
    }
    if (done_.wait_for(lock, poll_interval, [&] { return busy_ == 0; })) break;
    lock.unlock();
    try {
      on_wait();
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      wait_error = std::current_exception();  // raised once the batch is over, not before
    }
    lock.lock();
  }
  task_ = nullptr;
  std::vector<std::exception_ptr> errors = std::move(errors_);
  errors_.clear();
  lock.unlock();
  if (wait_error) std::rethrow_exception(wait_error);
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

void WorkerPool::shutdown() {
  if (is_worker()) throw std::logic_error("a worker pool shut down from one of its own workers");
  std::lock_guard<std::mutex> running(run_mutex_);  // after the batch in progress
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
  }
  wakeup_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

}  // namespace mjfast
