#include "vector/worker_pool.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "common/errors.h"

namespace mjfast {
namespace {

// The pool whose worker the calling thread is (null elsewhere).
thread_local const WorkerPool* current_pool = nullptr;

// How long a worker spins after a batch before it sleeps, and the caller before it waits for the
// last task: longer than the Python between two VectorEnv.step() calls of a training loop, so
// that those hand over without a sleep and a wake-up (each some microseconds, many more on a
// loaded machine), and short enough that an idle pool costs nothing.
constexpr auto kSpin = std::chrono::microseconds(50);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Spins until `done()` or kSpin has passed; whether done() came true.
template <class Done>
bool spin_until(Done&& done) {
  if (done()) return true;
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (true) {
    for (int i = 0; i < 64; ++i) {
      cpu_relax();
      if (done()) return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

// Sets the calling thread's pool for a scope (the caller of run(), while it helps).
class CurrentPool {
 public:
  explicit CurrentPool(const WorkerPool* pool) : saved_(current_pool) { current_pool = pool; }
  ~CurrentPool() { current_pool = saved_; }
  CurrentPool(const CurrentPool&) = delete;
  CurrentPool& operator=(const CurrentPool&) = delete;

 private:
  const WorkerPool* saved_;
};

}  // namespace

WorkerPool::WorkerPool(int threads, ThreadHooks hooks, bool caller_helps)
    : hooks_(std::move(hooks)), threads_(threads), caller_helps_(caller_helps) {
  if (threads < 1) {
    throw std::invalid_argument("a worker pool needs at least one thread, got " +
                                std::to_string(threads));
  }
  const int workers = caller_helps ? threads - 1 : threads;
  workers_.reserve(static_cast<std::size_t>(workers));
  try {
    for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
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

void WorkerPool::run_tasks(std::unique_lock<std::mutex>& lock) {
  while (next_ < count_) {
    const std::size_t index = next_++;
    const Task* task = task_;
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
    if (error) {
      errors_[index] = std::move(error);
      any_error_ = true;
    }
    if (--unfinished_ == 0) {
      batch_done_.store(true, std::memory_order_release);
      if (caller_sleeping_) done_.notify_all();
    }
  }
}

void WorkerPool::work() {
  current_pool = this;
  if (hooks_.on_start) hooks_.on_start();
  std::uint64_t seen = 0;
  while (true) {
    spin_until([&] {
      return batch_.load(std::memory_order_acquire) != seen ||
             stopping_flag_.load(std::memory_order_acquire);
    });
    std::unique_lock<std::mutex> lock(mutex_);
    if (!stopping_ && batch_.load(std::memory_order_relaxed) == seen) {
      ++sleeping_workers_;
      wakeup_.wait(lock,
                   [&] { return stopping_ || batch_.load(std::memory_order_relaxed) != seen; });
      --sleeping_workers_;
    }
    const std::uint64_t batch = batch_.load(std::memory_order_relaxed);
    if (batch == seen) break;  // stopping, and no batch left to do
    seen = batch;
    run_tasks(lock);
  }
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
  unfinished_ = count;
  any_error_ = false;
  if (errors_.size() < count) errors_.resize(count);
  batch_done_.store(false, std::memory_order_relaxed);
  // A helping caller runs a one-task batch alone (no worker woken); otherwise the workers get it.
  if (!caller_helps_ || count > 1 || workers_.empty()) {
    if (!workers_.empty()) {
      batch_.fetch_add(1, std::memory_order_release);
      if (sleeping_workers_ > 0) wakeup_.notify_all();
    }
  }
  std::exception_ptr wait_error;
  auto poll = [&] {
    lock.unlock();
    try {
      on_wait();
    }
    MJFAST_RETHROW_FORCED_UNWIND
    catch (...) {
      wait_error = std::current_exception();  // raised once the batch is over, not before
    }
    lock.lock();
  };
  if (caller_helps_) {
    const CurrentPool helping(this);
    run_tasks(lock);
  }
  while (unfinished_ > 0) {
    lock.unlock();
    spin_until([&] { return batch_done_.load(std::memory_order_acquire); });
    lock.lock();
    if (unfinished_ == 0) break;
    caller_sleeping_ = true;
    if (!on_wait || wait_error) {
      done_.wait(lock, [&] { return unfinished_ == 0; });
    } else if (!done_.wait_for(lock, poll_interval, [&] { return unfinished_ == 0; })) {
      caller_sleeping_ = false;
      poll();
    }
    caller_sleeping_ = false;
  }
  task_ = nullptr;
  std::exception_ptr first_error;
  if (any_error_) {
    for (std::size_t i = 0; i < count; ++i) {
      if (errors_[i] && !first_error) first_error = errors_[i];
      errors_[i] = nullptr;
    }
  }
  lock.unlock();
  if (wait_error) std::rethrow_exception(wait_error);
  if (first_error) std::rethrow_exception(first_error);
}

void WorkerPool::shutdown() {
  if (is_worker()) throw std::logic_error("a worker pool shut down from one of its own workers");
  std::lock_guard<std::mutex> running(run_mutex_);  // after the batch in progress
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && workers_.empty()) return;
    stopping_ = true;
    stopping_flag_.store(true, std::memory_order_release);
  }
  wakeup_.notify_all();
  for (std::thread& worker : workers_) {
    if (worker.joinable()) worker.join();
  }
  workers_.clear();
}

}  // namespace mjfast
