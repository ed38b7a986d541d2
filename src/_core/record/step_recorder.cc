#include "record/step_recorder.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace mjfast {

namespace {
constexpr int kStateSpec = mjSTATE_INTEGRATION;
}

StepRecorder::StepRecorder(std::size_t capacity, std::uint64_t state_every, double state_period,
                           bool replaying, bool wait_when_full)
    : ring_(std::max<std::size_t>(capacity, 1)),
      state_every_(state_every),
      state_period_(state_period),
      replaying_(replaying),
      wait_when_full_(wait_when_full) {}

StepRecorder::Entry* StepRecorder::claim(std::unique_lock<std::mutex>& lock) {
  if (size_ == ring_.size() && wait_when_full_ && !closed_) {
    waits_.fetch_add(1, std::memory_order_relaxed);
    room_.wait(lock, [&] { return closed_ || size_ < ring_.size(); });
  }
  if (size_ == ring_.size()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  Entry* slot = &ring_[(head_ + size_) % ring_.size()];
  ++size_;
  return slot;
}

void StepRecorder::commands_applied(const mjModel* m, const mjData* d, unsigned fields,
                                    std::uint64_t model_generation) {
  std::size_t total = 0;
  for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
    if (fields & (1u << i)) total += static_cast<std::size_t>(kCommandFields[i].size(m));
  }
  std::unique_lock<std::mutex> lock(ring_mutex_);
  Entry* entry = claim(lock);
  if (entry == nullptr) return;
  entry->kind = Kind::kCommands;
  entry->step = steps_.load(std::memory_order_relaxed);
  entry->step_count = 0;
  entry->model_generation = model_generation;
  entry->time = d->time;
  entry->fields = fields;
  entry->values.resize(total);  // allocates only while the slot is smaller than ever before
  mjtNum* out = entry->values.data();
  for (std::size_t i = 0; i < kCommandFieldCount; ++i) {
    entry->field_sizes[i] = 0;
    if (!(fields & (1u << i))) continue;
    const auto size = static_cast<std::size_t>(kCommandFields[i].size(m));
    std::copy_n(d->*kCommandFields[i].member, size, out);
    entry->field_sizes[i] = size;
    out += size;
  }
}

void StepRecorder::after_step(const mjModel* m, const mjData* d, std::uint64_t step_count,
                              std::uint64_t model_generation) {
  const std::uint64_t steps = steps_.load(std::memory_order_relaxed) + 1;
  steps_.store(steps, std::memory_order_release);
  bool due = false;
  if (state_every_ > 0) {
    due = steps % state_every_ == 0;
  } else if (state_period_ > 0.0) {
    // Time moved back (a reset): the schedule restarts from the new time.
    // Half a step early counts: time summed step by step falls a rounding error short of the
    // multiple (1500 steps of 2 ms end at 2.9999999999999...).
    const double time = d->time + 0.5 * m->opt.timestep;
    if (d->time < last_time_) next_state_time_ = next_multiple(time);
    due = time >= next_state_time_;
    if (due) next_state_time_ = next_multiple(time);
  }
  last_time_ = d->time;
  if (!due) return;
  std::unique_lock<std::mutex> lock(ring_mutex_);
  capture_state_locked(lock, m, d, step_count, model_generation);
}

void StepRecorder::begin(const mjModel* m, const mjData* d) {
  last_time_ = d->time;
  if (state_period_ > 0.0) next_state_time_ = next_multiple(d->time + 0.5 * m->opt.timestep);
}

double StepRecorder::next_multiple(double time) const {
  return (std::floor(time / state_period_) + 1) * state_period_;
}

void StepRecorder::capture_state_locked(std::unique_lock<std::mutex>& lock, const mjModel* m,
                                        const mjData* d, std::uint64_t step_count,
                                        std::uint64_t model_generation) {
  Entry* entry = claim(lock);
  if (entry == nullptr) return;
  entry->kind = Kind::kState;
  entry->step = steps_.load(std::memory_order_relaxed);
  entry->step_count = step_count;
  entry->model_generation = model_generation;
  entry->time = d->time;
  entry->fields = 0;
  entry->values.resize(static_cast<std::size_t>(mj_stateSize(m, kStateSpec)));
  mj_getState(m, d, entry->values.data(), kStateSpec);
}

void StepRecorder::close() {
  {
    std::lock_guard<std::mutex> lock(ring_mutex_);
    closed_ = true;
  }
  room_.notify_all();
}

std::size_t StepRecorder::drain(std::vector<Entry>& out) {
  std::unique_lock<std::mutex> lock(ring_mutex_);
  if (out.size() < size_) out.resize(size_);  // the entries past `size_` keep their buffers too
  const std::size_t taken_count = size_;
  for (std::size_t i = 0; i < size_; ++i) {
    Entry& slot = ring_[(head_ + i) % ring_.size()];
    Entry& taken = out[i];
    std::swap(taken.values, slot.values);  // the slot keeps the writer's old buffer's memory
    taken.kind = slot.kind;
    taken.step = slot.step;
    taken.step_count = slot.step_count;
    taken.model_generation = slot.model_generation;
    taken.time = slot.time;
    taken.fields = slot.fields;
    taken.field_sizes = slot.field_sizes;
  }
  head_ = (head_ + size_) % ring_.size();
  size_ = 0;
  lock.unlock();
  if (taken_count > 0) room_.notify_all();
  return taken_count;
}

}  // namespace mjfast
