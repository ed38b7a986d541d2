// HandoffRing (handoff/handoff_ring.h) for Python: a bus tap's messages handed from the publishing
// thread to a writer thread (mjfast.bus.handoff). The ring holds references: pushing is a
// reference count and a move under the ring's leaf lock, so the publishing thread never converts
// or serialises anything; the writer takes the references back with the GIL released while it
// waits.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bind/bindings.h"
#include "handoff/handoff_ring.h"

namespace mjfast {

namespace {

// One waiting message: strong references to its topic and message (released with the GIL held,
// by whoever ends up with them), and the stamp the producer gave it (the simulated time at the
// publish, for a recording).
struct PyMessage {
  PyObject* topic = nullptr;
  PyObject* message = nullptr;
  double stamp = 0.0;

  PyMessage() = default;
  PyMessage(PyMessage&& other) noexcept
      : topic(std::exchange(other.topic, nullptr)),
        message(std::exchange(other.message, nullptr)),
        stamp(other.stamp) {}
  PyMessage& operator=(PyMessage&& other) noexcept {
    std::swap(topic, other.topic);
    std::swap(message, other.message);
    stamp = other.stamp;
    return *this;
  }
  PyMessage(const PyMessage&) = delete;
  PyMessage& operator=(const PyMessage&) = delete;
  ~PyMessage() = default;  // the references are released explicitly, with the GIL (release())

  void release() {  // GIL held
    Py_CLEAR(topic);
    Py_CLEAR(message);
  }
};

using Ring = HandoffRing<PyMessage>;

class PyHandoffRing {
 public:
  PyHandoffRing(std::size_t capacity, HandoffPolicy policy) : ring_(capacity, policy) {}
  ~PyHandoffRing() {
    // Dropped with the GIL held (Python's dealloc): what still waits is released here.
    std::vector<Ring::Item> left;
    const std::size_t count = ring_.take(left, ring_.capacity(), std::chrono::nanoseconds(0));
    for (std::size_t i = 0; i < count; ++i) left[i].payload.release();
  }

  // True: handed over; false: the ring is closed (nothing kept).
  bool push(const py::object& topic, const py::object& message, double stamp) {
    PyMessage payload;
    payload.topic = topic.inc_ref().ptr();
    payload.message = message.inc_ref().ptr();
    payload.stamp = stamp;
    const std::uint32_t key = key_of(topic);
    PyMessage displaced;
    while (true) {
      const Ring::Pushed pushed = ring_.try_push(key, payload, displaced);
      if (pushed == Ring::Pushed::kTaken) return true;
      if (pushed == Ring::Pushed::kDisplaced) {
        displaced.release();
        return true;
      }
      if (pushed == Ring::Pushed::kClosed) {
        payload.release();
        return false;
      }
      // Full (kWait): the writer needs the GIL to convert what it took, so it is released while
      // this thread waits for room; the caller holds no lock the writer takes.
      const bool open = without_gil([&] { return ring_.wait_for_room(); });
      if (!open) {
        payload.release();
        return false;
      }
    }
  }

  py::list take(std::size_t max, double timeout_s) {
    const auto timeout = std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::duration<double>(timeout_s > 0.0 ? timeout_s : 0.0));
    // Waits for the publishing thread, which may hold the GIL to push: released meanwhile.
    const std::size_t count = without_gil([&] { return ring_.take(taken_, max, timeout); });
    py::list out(count);
    for (std::size_t i = 0; i < count; ++i) {
      PyMessage& item = taken_[i].payload;
      // The tuple takes over both references.
      PyObject* entry = PyTuple_New(3);
      if (entry == nullptr) {
        for (std::size_t j = i; j < count; ++j) taken_[j].payload.release();
        throw py::error_already_set();
      }
      PyTuple_SET_ITEM(entry, 0, std::exchange(item.topic, nullptr));
      PyTuple_SET_ITEM(entry, 1, std::exchange(item.message, nullptr));
      PyTuple_SET_ITEM(entry, 2, PyFloat_FromDouble(item.stamp));
      PyList_SET_ITEM(out.ptr(), static_cast<py::ssize_t>(i), entry);
    }
    return out;
  }

  Ring& ring() { return ring_; }

 private:
  // A topic's key: its number in the order topics were first pushed (GIL held).
  std::uint32_t key_of(const py::object& topic) {
    PyObject* found = PyDict_GetItemWithError(keys_.ptr(), topic.ptr());
    if (found != nullptr) return static_cast<std::uint32_t>(PyLong_AsUnsignedLong(found));
    if (PyErr_Occurred()) throw py::error_already_set();
    const auto key = static_cast<std::uint32_t>(PyDict_Size(keys_.ptr()));
    keys_[topic] = key;
    return key;
  }

  Ring ring_;
  py::dict keys_;
  std::vector<Ring::Item> taken_;  // the writer's: reused by every take()
};

HandoffPolicy policy_of(const std::string& name) {
  if (name == "keep_newest") return HandoffPolicy::kKeepNewest;
  if (name == "wait") return HandoffPolicy::kWait;
  throw py::value_error("a handoff ring's policy is 'keep_newest' or 'wait', got '" + name + "'");
}

}  // namespace

void bind_handoff(py::module_& module) {
  py::class_<PyHandoffRing>(module, "HandoffRing")
      .def(py::init([](std::size_t capacity, const std::string& policy) {
             if (capacity == 0) throw py::value_error("a handoff ring needs capacity >= 1, got 0");
             return new PyHandoffRing(capacity, policy_of(policy));
           }),
           py::arg("capacity"), py::arg("policy"),
           "`capacity` preallocated slots; a full ring keeps the newest message per topic "
           "('keep_newest', counted in dropped) or makes push() wait ('wait', counted in waits).")
      .def("push", &PyHandoffRing::push, py::arg("topic"), py::arg("message"),
           py::arg("stamp") = 0.0,
           "Hands (topic, message, stamp) to the writer; False once closed (nothing kept).")
      .def("take", &PyHandoffRing::take, py::arg("max") = 64, py::arg("timeout") = 0.0,
           "Up to `max` waiting [(topic, message, stamp)], oldest first, waiting up to `timeout` "
           "seconds (the GIL released) for the first.")
      .def(
          "close", [](PyHandoffRing& self) { self.ring().close(); },
          "Refuses pushes from now on and wakes every waiter; what waits can still be taken.")
      .def_property_readonly("closed", [](PyHandoffRing& self) { return self.ring().closed(); })
      .def_property_readonly("capacity", [](PyHandoffRing& self) { return self.ring().capacity(); })
      .def_property_readonly("waiting", [](PyHandoffRing& self) { return self.ring().waiting(); })
      .def_property_readonly("pushed", [](PyHandoffRing& self) { return self.ring().pushed(); })
      .def_property_readonly("dropped", [](PyHandoffRing& self) { return self.ring().dropped(); })
      .def_property_readonly("waits", [](PyHandoffRing& self) { return self.ring().waits(); });
}

}  // namespace mjfast
