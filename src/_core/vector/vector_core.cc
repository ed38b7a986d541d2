#include "vector/vector_core.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/call_context.h"
#include "common/errors.h"
#include "common/hooks.h"

namespace mjfast {
namespace {

// A worker more than there are worlds would never have a world to step (SPEC §18: capped, not
// discovered); below 1 is the pool's to refuse.
int capped_threads(int threads, std::size_t worlds) {
  if (threads < 1 || worlds == 0) return threads;
  return static_cast<int>(std::min(static_cast<std::size_t>(threads), worlds));
}

}  // namespace

VectorCore::VectorCore(std::vector<std::shared_ptr<EnvCore>> worlds, int threads,
                       WorkerPool::ThreadHooks hooks)
    : worlds_(std::move(worlds)),
      // The caller of step() steps worlds too: one world on one thread never leaves it.
      pool_(capped_threads(threads, worlds_.size()), std::move(hooks), /*caller_helps=*/true),
      step_errors_(worlds_.size()),
      step_task_([this](std::size_t index) { step_world(index); }),
      world_poll_([this] { return poll_world(); }),
      closed_during_step_(
          std::make_exception_ptr(std::logic_error("the VectorEnv was closed during step()"))) {
  if (worlds_.empty()) throw std::invalid_argument("a VectorEnv needs at least one world");
  for (const auto& world : worlds_) {
    if (!world || world->model() == nullptr || world->data() == nullptr) {
      throw std::invalid_argument("every world of a VectorEnv must be bound to a model and data");
    }
  }
}

VectorCore::~VectorCore() {
  try {
    close();
  } catch (...) {
    // Refused only from a worker of the pool; the pool's own destructor copes.
  }
}

namespace {

std::size_t width_in(const mjModel* model, VectorCore::Field field) {
  switch (field) {
    case VectorCore::Field::kQpos: return static_cast<std::size_t>(model->nq);
    case VectorCore::Field::kQvel: return static_cast<std::size_t>(model->nv);
    case VectorCore::Field::kCtrl: return static_cast<std::size_t>(model->nu);
    case VectorCore::Field::kSensordata: return static_cast<std::size_t>(model->nsensordata);
    case VectorCore::Field::kTime: return 1;
  }
  return 0;
}

const char* field_name(VectorCore::Field field) {
  switch (field) {
    case VectorCore::Field::kQpos: return "qpos";
    case VectorCore::Field::kQvel: return "qvel";
    case VectorCore::Field::kCtrl: return "ctrl";
    case VectorCore::Field::kSensordata: return "sensordata";
    case VectorCore::Field::kTime: return "time";
  }
  return "?";
}

}  // namespace

std::size_t VectorCore::width(Field field) const {
  return width_in(worlds_.front()->model(), field);
}

void VectorCore::check_widths(const Field* fields, std::size_t count, std::size_t expected) const {
  for (std::size_t index = 0; index < worlds_.size(); ++index) {
    std::size_t row = 0;
    for (std::size_t i = 0; i < count; ++i) row += width_in(worlds_[index]->model(), fields[i]);
    if (row == expected) continue;
    std::string names;
    for (std::size_t i = 0; i < count; ++i) {
      names += (i ? ", " : "") + std::string(field_name(fields[i]));
    }
    throw std::invalid_argument(
        "the worlds' " + names + " differ in width since a spawn or removal in one of them: " +
        "world " + std::to_string(index) + "'s " + names + " take " + std::to_string(row) +
        " numbers a row, not the " + std::to_string(expected) +
        " the batch was sized for; batched arrays need one width: read each world's data "
        "(vector.world(i).data) instead");
  }
}

std::unique_lock<std::mutex> VectorCore::lock(const char* what, bool refuse_closed) {
  if (refuse_closed && closed()) {
    throw std::logic_error(std::string(what) + " on a closed VectorEnv");
  }
  if (pool_.is_worker()) call_context::refuse(call_context::Refusal::kVectorOwnWorld, what);
  std::unique_lock<std::mutex> held(mutex_, std::defer_lock);
  if (!hooks::in_dispatch() && !hooks::in_plugin_callback()) {
    held.lock();
  } else if (!held.try_lock()) {
    // Waiting here from inside a plugin callback could close a cycle (lock order: this is 0).
    call_context::refuse(call_context::Refusal::kBusyVectorFromCallback, what);
  }
  if (refuse_closed && closed()) {
    throw std::logic_error(std::string(what) + " on a closed VectorEnv");
  }
  return held;
}

std::unique_lock<std::mutex> VectorCore::hold(const char* what) { return lock(what); }

std::exception_ptr VectorCore::interrupt() const {
  if (closing_.load(std::memory_order_acquire)) return closed_during_step_;
  return interrupted_.load(std::memory_order_acquire) ? interrupt_ : nullptr;
}

std::exception_ptr VectorCore::poll_world() {
  if (step_interrupted_ != nullptr && std::this_thread::get_id() == step_caller_ && !interrupt()) {
    if (std::exception_ptr error = (*step_interrupted_)()) {
      interrupt_ = std::move(error);
      interrupted_.store(true, std::memory_order_release);
    }
  }
  return interrupt();
}

void VectorCore::step_world(std::size_t index) {
  EnvCore& world = *worlds_[index];
  try {
    if (closing_.load(std::memory_order_acquire)) return;  // not begun: nothing to stop
    // Nothing else steps a world of a VectorEnv (its façade exposes no step or start), so its
    // ctrl is ours until its step() below takes its step mutex.
    const std::size_t nu = static_cast<std::size_t>(world.model()->nu);
    if (step_ctrl_ != nullptr && nu > 0) {
      std::copy(step_ctrl_ + index * nu, step_ctrl_ + (index + 1) * nu, world.data()->ctrl);
    }
    world.step(step_n_, &world_poll_);
  }
  MJFAST_RETHROW_FORCED_UNWIND
  catch (const Interrupted&) {
    step_errors_[index] = std::current_exception();
    // On the calling thread (Python's main thread), a Python plugin's callback may take the
    // Ctrl-C as a KeyboardInterrupt before the poll sees it: every world stops, as for the poll.
    if (std::this_thread::get_id() == step_caller_ && !interrupt()) {
      interrupt_ = step_errors_[index];
      interrupted_.store(true, std::memory_order_release);
    }
  }
  catch (...) {
    step_errors_[index] = std::current_exception();  // each task writes its own slot
  }
}

void VectorCore::step(std::int64_t n, const double* ctrl, std::size_t ctrl_width,
                      const EnvCore::InterruptPoll* interrupted) {
  if (n < 0) throw std::invalid_argument("step(n) needs n >= 0, got " + std::to_string(n));
  // Checked before the vector is taken: a world this thread holds (a plugin's load or reset
  // stepping the vector) would deadlock the worker that steps it.
  for (const auto& world : worlds_) world->check_can_step("VectorEnv.step()");
  std::unique_lock<std::mutex> held = lock("VectorEnv.step()");
  if (ctrl != nullptr) {
    const Field field = Field::kCtrl;
    check_widths(&field, 1, ctrl_width);  // under mutex_: no spawn or removal meanwhile
  }
  {
    std::lock_guard<std::mutex> failed(failed_mutex_);
    failed_.clear();
  }
  interrupt_ = nullptr;
  interrupted_.store(false, std::memory_order_release);
  step_n_ = n;
  step_ctrl_ = ctrl;
  step_interrupted_ = interrupted;
  step_caller_ = std::this_thread::get_id();
  // The caller's poll while it waits for the workers (once it has no world left to step).
  std::function<void()> on_wait;
  if (interrupted) {
    on_wait = [this] { poll_world(); };
  }
  pool_.run(worlds_.size(), step_task_, on_wait);
  step_ctrl_ = nullptr;
  step_interrupted_ = nullptr;

  std::exception_ptr first_error;
  std::exception_ptr first_interrupt;
  std::vector<std::size_t> failed;
  for (std::size_t index = 0; index < step_errors_.size(); ++index) {
    if (!step_errors_[index]) continue;
    std::exception_ptr error = std::move(step_errors_[index]);
    step_errors_[index] = nullptr;
    try {
      std::rethrow_exception(error);
    } catch (const Interrupted&) {
      // The vector's own interrupt (or a plugin's KeyboardInterrupt): not a world's failure.
      if (!first_interrupt) first_interrupt = error;
      continue;
    } catch (...) {
    }
    failed.push_back(index);
    if (!first_error) first_error = error;
  }
  held.unlock();
  if (!failed.empty()) {
    std::lock_guard<std::mutex> lock(failed_mutex_);
    failed_ = failed;
  }
  if (first_error) std::rethrow_exception(first_error);  // a plugin's error outranks an interrupt
  if (closing_.load(std::memory_order_acquire)) std::rethrow_exception(closed_during_step_);
  if (first_interrupt) std::rethrow_exception(first_interrupt);
  if (std::exception_ptr error = interrupt()) throw Interrupted(error);
}

std::vector<std::size_t> VectorCore::failed_worlds() const {
  std::lock_guard<std::mutex> lock(failed_mutex_);
  return failed_;
}

namespace {

const mjtNum* field_data(const mjData* data, VectorCore::Field field) {
  switch (field) {
    case VectorCore::Field::kQpos: return data->qpos;
    case VectorCore::Field::kQvel: return data->qvel;
    case VectorCore::Field::kCtrl: return data->ctrl;
    case VectorCore::Field::kSensordata: return data->sensordata;
    case VectorCore::Field::kTime: return &data->time;
  }
  return nullptr;
}

}  // namespace

void VectorCore::gather_rows(const Field* fields, std::size_t count, double* out,
                             std::size_t row_width) {
  std::unique_lock<std::mutex> held = lock("reading a VectorEnv's arrays");
  check_widths(fields, count, row_width);  // under mutex_: no spawn or removal meanwhile
  for (const auto& world : worlds_) {
    const mjData* data = world->data();
    const mjModel* model = world->model();
    for (std::size_t i = 0; i < count; ++i) {
      const mjtNum* source = field_data(data, fields[i]);
      out = std::copy(source, source + width_in(model, fields[i]), out);
    }
  }
}

void VectorCore::close() {
  if (closed()) return;
  // Refused calls stop nothing: from a worker, or from inside a plugin callback, where close()
  // only takes a free vector (lock()), the running step is left alone.
  if (pool_.is_worker()) call_context::refuse(call_context::Refusal::kVectorOwnWorld, "close()");
  const bool from_callback = hooks::in_dispatch() || hooks::in_plugin_callback();
  if (!from_callback) closing_.store(true, std::memory_order_release);
  std::unique_lock<std::mutex> held = lock("close()", /*refuse_closed=*/false);
  if (closed()) return;  // another thread's close() came first
  closing_.store(true, std::memory_order_release);
  closed_.store(true, std::memory_order_release);
  pool_.shutdown();
}

}  // namespace mjfast
