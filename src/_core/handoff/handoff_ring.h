// HandoffRing: a bounded ring of preallocated slots between a thread that must not be slowed (the
// physics thread publishing a bus message) and a writer thread that converts, serialises and
// sends what it takes (the ROS 2 bridge, a recording, the remote bus's topic forwarding). An item
// is a key (a topic's number) and a payload (what the producer hands over; the bindings hand a
// Python object's reference). What a full ring does is the consumer's choice:
//   - kKeepNewest (the bridge, the remote bus: a keep-last QoS, as ros2_control's realtime
//     publisher): never waits. The newest waiting item of the same key is replaced by the new
//     one (it keeps its place in the order); with none of that key waiting, the oldest item is
//     displaced. Either way the one that goes is handed back and counted in dropped().
//   - kWait (a recording: nothing is lost): try_push() says kFull and the producer waits in
//     wait_for_room() (counted in waits()) until the writer has taken something.
// It knows nothing of Python: a displaced payload is handed back to the producer, who releases it
// where it may (the bindings: with the GIL). Its one mutex is a leaf of the lock order
// (env_core.h): held to move an item in or out, never while waiting for anything else.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace mjfast {

enum class HandoffPolicy { kKeepNewest, kWait };

template <class Payload>
class HandoffRing {
 public:
  struct Item {
    std::uint32_t key = 0;
    Payload payload{};
  };
  enum class Pushed {
    kTaken,      // in the ring
    kDisplaced,  // in the ring; `displaced` holds the item it replaced (kKeepNewest)
    kFull,       // not taken: the ring is full (kWait); wait_for_room(), then try again
    kClosed,     // not taken: close() was called
  };

  HandoffRing(std::size_t capacity, HandoffPolicy policy) : ring_(capacity), policy_(policy) {
    if (capacity == 0) throw std::invalid_argument("a handoff ring needs at least one slot");
  }
  HandoffRing(const HandoffRing&) = delete;
  HandoffRing& operator=(const HandoffRing&) = delete;

  std::size_t capacity() const { return ring_.size(); }
  HandoffPolicy policy() const { return policy_; }

  // ---- producer ---------------------------------------------------------------------------------
  // Moves `payload` in (unless kFull or kClosed, where it is left as it was). Never waits but for
  // the leaf mutex, which no holder keeps across anything but a move.
  Pushed try_push(std::uint32_t key, Payload& payload, Payload& displaced) {
    Pushed result = Pushed::kTaken;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closed_) return Pushed::kClosed;
      if (size_ == ring_.size()) {
        if (policy_ == HandoffPolicy::kWait) return Pushed::kFull;
        Item* same = nullptr;
        for (std::size_t i = size_; i-- > 0;) {
          Item& item = ring_[(head_ + i) % ring_.size()];
          if (item.key == key) {
            same = &item;
            break;
          }
        }
        if (same != nullptr) {
          displaced = std::move(same->payload);
          same->payload = std::move(payload);
        } else {
          // No item of this key waits: the oldest one goes, the new one joins the end.
          Item& oldest = ring_[head_];
          displaced = std::move(oldest.payload);
          head_ = (head_ + 1) % ring_.size();
          Item& slot = ring_[(head_ + size_ - 1) % ring_.size()];
          slot.key = key;
          slot.payload = std::move(payload);
        }
        dropped_.fetch_add(1, std::memory_order_relaxed);
        result = Pushed::kDisplaced;
      } else {
        Item& slot = ring_[(head_ + size_) % ring_.size()];
        slot.key = key;
        slot.payload = std::move(payload);
        ++size_;
      }
      pushed_.fetch_add(1, std::memory_order_relaxed);
    }
    ready_.notify_one();
    return result;
  }

  // After try_push() said kFull: waits until a slot is free or the ring is closed (true: try
  // again; false: closed). Counted in waits().
  bool wait_for_room() {
    waits_.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock<std::mutex> lock(mutex_);
    room_.wait(lock, [&] { return closed_ || size_ < ring_.size(); });
    return !closed_;
  }

  // ---- writer -----------------------------------------------------------------------------------
  // Moves up to `max` waiting items (oldest first) into out[0, n) and returns n, waiting up to
  // `timeout` for the first one (0 when that ran out, or once closed and empty). `out` keeps its
  // size from one call to the next, so that taking allocates nothing after the first time.
  std::size_t take(std::vector<Item>& out, std::size_t max, std::chrono::nanoseconds timeout) {
    std::size_t count = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (size_ == 0 && !closed_ && timeout.count() > 0) {
        ready_.wait_for(lock, timeout, [&] { return closed_ || size_ > 0; });
      }
      count = size_ < max ? size_ : max;
      if (out.size() < count) out.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        Item& slot = ring_[(head_ + i) % ring_.size()];
        out[i].key = slot.key;
        out[i].payload = std::move(slot.payload);
      }
      head_ = (head_ + count) % ring_.size();
      size_ -= count;
    }
    if (count > 0) room_.notify_all();
    return count;
  }

  // Waits up to `timeout` until an item waits, without taking it: true when one does, false when
  // the time ran out or the ring is closed and empty. For a writer that takes and delivers under
  // a lock of its own, which it does not hold while it waits.
  bool wait_ready(std::chrono::nanoseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (size_ == 0 && !closed_ && timeout.count() > 0) {
      ready_.wait_for(lock, timeout, [&] { return closed_ || size_ > 0; });
    }
    return size_ > 0;
  }

  // Wakes every waiter; pushes are refused from now on, what waits can still be taken.
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
    }
    ready_.notify_all();
    room_.notify_all();
  }
  bool closed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }
  std::size_t waiting() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return size_;
  }

  // ---- figures (any thread) ---------------------------------------------------------------------
  std::uint64_t pushed() const { return pushed_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }

 private:
  mutable std::mutex mutex_;       // a leaf (7 in env_core.h's order)
  std::condition_variable ready_;  // the writer: an item waits, or closed
  std::condition_variable room_;   // a kWait producer: a slot is free, or closed
  std::vector<Item> ring_;         // preallocated slots
  std::size_t head_ = 0;           // oldest waiting item
  std::size_t size_ = 0;           // waiting items
  bool closed_ = false;
  const HandoffPolicy policy_;
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> dropped_{0};
  std::atomic<std::uint64_t> waits_{0};
};

}  // namespace mjfast
