#include "vector/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace mjfast {
namespace {

using std::chrono::milliseconds;

TEST(WorkerPool, RunsEveryTaskOnceAndReturnsWhenAllHaveReturned) {
  WorkerPool pool(3);
  EXPECT_EQ(pool.size(), 3);
  std::vector<std::atomic<int>> runs(50);
  pool.run(runs.size(), [&](std::size_t i) { runs[i].fetch_add(1); });
  for (const auto& count : runs) EXPECT_EQ(count.load(), 1);
  pool.run(0, [&](std::size_t) { FAIL() << "no task to run"; });
}

TEST(WorkerPool, ItsThreadsAreStartedOnceAndReusedByEveryBatch) {
  std::atomic<int> started{0}, ended{0};
  std::set<std::thread::id> seen;
  std::mutex seen_mutex;
  {
    WorkerPool pool(2, {[&] { started.fetch_add(1); }, [&] { ended.fetch_add(1); }});
    for (int batch = 0; batch < 20; ++batch) {
      pool.run(8, [&](std::size_t) {
        EXPECT_TRUE(pool.is_worker());
        std::lock_guard<std::mutex> lock(seen_mutex);
        seen.insert(std::this_thread::get_id());
      });
    }
    EXPECT_FALSE(pool.is_worker());
    EXPECT_LE(seen.size(), 2u);
    EXPECT_EQ(seen.count(std::this_thread::get_id()), 0u);  // the caller only waits
  }
  EXPECT_EQ(started.load(), 2);
  EXPECT_EQ(ended.load(), 2);
}

TEST(WorkerPool, TasksOverlapOnSeveralThreads) {
  // Two tasks that each wait for the other to start can only both finish on two threads.
  WorkerPool pool(2);
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  pool.run(2, [&](std::size_t) {
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (arrived.load() == 2) met.fetch_add(1);
  });
  EXPECT_EQ(met.load(), 2);
}

TEST(WorkerPool, ATaskErrorIsRethrownAfterTheWholeBatch) {
  WorkerPool pool(2);
  std::atomic<int> ran{0};
  EXPECT_THROW(pool.run(10,
                        [&](std::size_t i) {
                          ran.fetch_add(1);
                          if (i == 3 || i == 7) throw std::runtime_error(std::to_string(i));
                        }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 10);
  try {
    pool.run(10, [&](std::size_t i) {
      if (i == 7 || i == 3) throw std::runtime_error(std::to_string(i));
    });
    ADD_FAILURE() << "run() did not rethrow";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "3");  // the lowest index's
  }
  pool.run(4, [](std::size_t) {});  // the pool goes on
}

TEST(WorkerPool, TheCallerPollsWhileItWaits) {
  WorkerPool pool(1);
  std::atomic<int> polls{0};
  // The task ends only once the caller has polled twice: run() must poll while it waits.
  pool.run(
      1,
      [&](std::size_t) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (polls.load() < 2 && std::chrono::steady_clock::now() < deadline) {
          std::this_thread::yield();
        }
      },
      [&] { polls.fetch_add(1); }, milliseconds(1));
  EXPECT_GE(polls.load(), 2);
}

TEST(WorkerPool, AHelpingCallerIsOneOfItsThreads) {
  std::atomic<int> started{0};
  WorkerPool pool(2, {[&] { started.fetch_add(1); }, {}}, /*caller_helps=*/true);
  EXPECT_EQ(pool.size(), 2);
  // A one-task batch runs on the caller alone, as one of the pool's threads.
  std::thread::id ran_on;
  pool.run(1, [&](std::size_t) {
    EXPECT_TRUE(pool.is_worker());
    ran_on = std::this_thread::get_id();
  });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  EXPECT_FALSE(pool.is_worker());
  // Two tasks that each wait for the other to start: the caller and the worker run one each.
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  for (int batch = 0; batch < 50; ++batch) {
    arrived = 0;
    pool.run(2, [&](std::size_t) {
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      if (arrived.load() == 2) met.fetch_add(1);
    });
  }
  EXPECT_EQ(met.load(), 100);
  EXPECT_EQ(started.load(), 1);  // one worker (it has run a task by now); the caller is the other
  // Errors: the lowest index's, after the whole batch, as without a helping caller.
  std::atomic<int> ran{0};
  try {
    pool.run(10, [&](std::size_t i) {
      ran.fetch_add(1);
      if (i == 7 || i == 3) throw std::runtime_error(std::to_string(i));
    });
    ADD_FAILURE() << "run() did not rethrow";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "3");
  }
  EXPECT_EQ(ran.load(), 10);
}

TEST(WorkerPool, AOneThreadHelpedPoolHasNoWorker) {
  std::atomic<int> started{0};
  WorkerPool pool(1, {[&] { started.fetch_add(1); }, {}}, /*caller_helps=*/true);
  std::vector<std::thread::id> ran_on(5);
  pool.run(5, [&](std::size_t i) { ran_on[i] = std::this_thread::get_id(); });
  for (const auto& id : ran_on) EXPECT_EQ(id, std::this_thread::get_id());
  EXPECT_EQ(started.load(), 0);
  pool.shutdown();
  EXPECT_THROW(pool.run(1, [](std::size_t) {}), std::logic_error);
}

TEST(WorkerPool, MisuseIsRefused) {
  EXPECT_THROW(WorkerPool(0), std::invalid_argument);
  WorkerPool pool(2);
  std::atomic<int> refused{0};
  pool.run(2, [&](std::size_t) {
    try {
      pool.run(1, [](std::size_t) {});
    } catch (const std::logic_error&) {
      refused.fetch_add(1);
    }
  });
  EXPECT_EQ(refused.load(), 2);  // a worker's run() would wait for itself
  pool.shutdown();
  pool.shutdown();  // idempotent
  EXPECT_THROW(pool.run(1, [](std::size_t) {}), std::logic_error);
}

}  // namespace
}  // namespace mjfast
