// HandoffRing (handoff/handoff_ring.h) for Python: a bus tap's messages handed from the publishing
// thread to a writer thread (mjfast.bus.handoff). The ring holds references: pushing is a
// reference count and a move under the ring's leaf lock, so the publishing thread never converts
// or serialises anything; the writer takes the references back with the GIL released while it
// waits. A recording's tap packs its messages as it pushes them instead (push_packed: a
// microsecond of the publisher's GIL, and its writer needs none per message).
#include <pybind11/numpy.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bind/bindings.h"
#include "handoff/handoff_ring.h"

namespace mjfast {

namespace {

// One waiting message: strong references to its topic and message (released with the GIL held,
// by whoever ends up with them), and the stamp the producer gave it (the simulated time at the
// publish, for a recording). Or the message packed at the publish (push_packed): its route's
// number in the ring's table, its bytes (pack_message's) and its log time in nanoseconds, no
// Python object at all, so that the writer needs the GIL for none of it.
constexpr std::uint32_t kNotPacked = UINT32_MAX;
struct PyMessage {
  PyObject* topic = nullptr;
  PyObject* message = nullptr;
  std::uint32_t route = kNotPacked;  // else a packed message (topic and message are null)
  double stamp = 0.0;
  std::int64_t stamp_ns = 0;
  std::vector<char> packed;

  PyMessage() = default;
  PyMessage(PyMessage&& other) noexcept
      : topic(std::exchange(other.topic, nullptr)),
        message(std::exchange(other.message, nullptr)),
        route(std::exchange(other.route, kNotPacked)),
        stamp(other.stamp),
        stamp_ns(other.stamp_ns),
        packed(std::move(other.packed)) {}
  PyMessage& operator=(PyMessage&& other) noexcept {
    std::swap(topic, other.topic);
    std::swap(message, other.message);
    std::swap(route, other.route);
    stamp = other.stamp;
    stamp_ns = other.stamp_ns;
    packed.swap(other.packed);
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

// ---- a bus message as bytes, for the recording's writer process ---------------------------------
// pack_message(message) -> bytes and unpack_message(bytes) -> message (mjfast.interop.record.writer
// uses them between mjfast and its own child only: native byte order, no versioning beyond the
// magic). What they carry: None, bool, int (64-bit), float, str, bytes, list, tuple and dict of
// those (their exact types, not subclasses: a subclass would come back as its base), and numpy
// arrays of a numeric dtype (bool, integers, floats, complex: their bytes, C order). Anything else
// raises TypeError, and the caller packs the message its own way. The writer thread packs with
// the GIL held, in C++, so that the physics thread (which needs the GIL for its Python plugins
// every step) waits for it a microsecond or two a message instead of the ten or more that the
// same walk costs in Python.
constexpr char kPackMagic[4] = {'M', 'J', 'P', '1'};
constexpr int kPackDepth = 64;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kLittleEndian = false;
#else
constexpr bool kLittleEndian = true;
#endif

// A record's header in pack_direct's block (mjfast.interop.record.writer reads it as "=IqI").
#pragma pack(push, 1)
struct DirectRecord {
  std::uint32_t route;
  std::int64_t stamp;
  std::uint32_t size;
};
#pragma pack(pop)
static_assert(sizeof(DirectRecord) == 16, "pack_direct's record header is 16 bytes, unpadded");

// The packed bytes of the last few lists of strings a ring packed (a JointState's joint names:
// the same str objects, in a new list, message after message), each kept with references to its
// strings: a list whose items are those very objects packs as a copy of those bytes, ~0.3 us
// less of the publishing thread's GIL for a humanoid's 21 names. Held references, so that an
// address seen is never another string's; the GIL held to read or change it (push_packed's).
class StringListCache {
 public:
  // The bytes `list` packs as, or null where it is none of the kept lists.
  const std::vector<char>* find(PyObject* list) const {
    const Py_ssize_t size = PyList_GET_SIZE(list);
    for (const Entry& entry : entries_) {
      if (static_cast<Py_ssize_t>(entry.items.size()) != size) continue;
      Py_ssize_t i = 0;
      while (i < size &&
             PyList_GET_ITEM(list, i) == entry.items[static_cast<std::size_t>(i)].ptr()) {
        ++i;
      }
      if (i == size) return &entry.packed;
    }
    return nullptr;
  }

  // Keeps `list` (every item an exact str) and its packed bytes, in place of the oldest entry.
  void keep(PyObject* list, const char* begin, const char* end) {
    Entry& entry = entries_[next_];
    next_ = (next_ + 1) % entries_.size();
    const Py_ssize_t size = PyList_GET_SIZE(list);
    entry.items.clear();
    entry.items.reserve(static_cast<std::size_t>(size));
    for (Py_ssize_t i = 0; i < size; ++i) {
      entry.items.push_back(py::reinterpret_borrow<py::object>(PyList_GET_ITEM(list, i)));
    }
    entry.packed.assign(begin, end);
  }

  void clear() {
    for (Entry& entry : entries_) {
      entry.items.clear();
      entry.packed.clear();
    }
  }

  // Lists shorter than this are packed as they come (their strings cost less than the lookup).
  static constexpr Py_ssize_t kMinimum = 4;

 private:
  struct Entry {
    std::vector<py::object> items;
    std::vector<char> packed;
  };
  std::array<Entry, 4> entries_;
  std::size_t next_ = 0;
};

class MessagePacker {
 public:
  py::bytes pack(const py::handle& message) {
    const std::vector<char>& out = pack_to_buffer(message.ptr());
    return py::bytes(out.data(), static_cast<py::ssize_t>(out.size()));
  }

  // The packed message in this packer's buffer, valid until its next call; with `lists`, lists
  // of strings are looked up there and kept there (GIL held).
  const std::vector<char>& pack_to_buffer(PyObject* message, StringListCache* lists = nullptr) {
    out_.assign(kPackMagic, kPackMagic + sizeof kPackMagic);
    lists_ = lists;
    put(message, 0);
    return out_;
  }

 private:
  template <class T>
  void raw(const T& value) {
    const char* bytes = reinterpret_cast<const char*>(&value);
    out_.insert(out_.end(), bytes, bytes + sizeof(T));
  }
  void sized(char tag, const char* data, std::size_t size) {
    if (size > UINT32_MAX) throw py::type_error("pack_message: a part over 4 GiB");
    out_.push_back(tag);
    raw(static_cast<std::uint32_t>(size));
    out_.insert(out_.end(), data, data + size);
  }
  void count(char tag, std::size_t size) {
    if (size > UINT32_MAX) throw py::type_error("pack_message: a container over 2**32 items");
    out_.push_back(tag);
    raw(static_cast<std::uint32_t>(size));
  }

  void put(PyObject* value, int depth) {
    if (depth > kPackDepth) throw py::type_error("pack_message: nested deeper than 64");
    if (value == Py_None) {
      out_.push_back('N');
    } else if (value == Py_True || value == Py_False) {
      out_.push_back(value == Py_True ? 'T' : 'F');
    } else if (PyFloat_CheckExact(value)) {
      out_.push_back('f');
      raw(PyFloat_AS_DOUBLE(value));
    } else if (PyLong_CheckExact(value)) {
      int overflow = 0;
      const long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
      if (overflow != 0) throw py::type_error("pack_message: an int beyond 64 bits");
      if (number == -1 && PyErr_Occurred()) throw py::error_already_set();
      out_.push_back('i');
      raw(static_cast<std::int64_t>(number));
    } else if (PyUnicode_CheckExact(value)) {
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(value, &size);
      if (text == nullptr) throw py::error_already_set();
      sized('s', text, static_cast<std::size_t>(size));
    } else if (PyBytes_CheckExact(value)) {
      sized('y', PyBytes_AS_STRING(value), static_cast<std::size_t>(PyBytes_GET_SIZE(value)));
    } else if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
      const bool list = PyList_CheckExact(value);
      const Py_ssize_t size = list ? PyList_GET_SIZE(value) : PyTuple_GET_SIZE(value);
      const bool cached = list && lists_ != nullptr && size >= StringListCache::kMinimum;
      if (cached) {
        if (const std::vector<char>* known = lists_->find(value)) {
          out_.insert(out_.end(), known->begin(), known->end());
          return;
        }
      }
      const std::size_t start = out_.size();
      bool strings = true;
      count(list ? 'l' : 't', static_cast<std::size_t>(size));
      for (Py_ssize_t i = 0; i < size; ++i) {
        // Held while packed: an array's attributes are looked up, which could let another thread
        // change the list (a message is not changed after its publish, but a bad one must not
        // crash the writer).
        const auto item = py::reinterpret_borrow<py::object>(list ? PyList_GET_ITEM(value, i)
                                                                  : PyTuple_GET_ITEM(value, i));
        strings = strings && PyUnicode_CheckExact(item.ptr());
        put(item.ptr(), depth + 1);
        if (list && PyList_GET_SIZE(value) != size) {
          throw py::type_error("pack_message: a list changed while it was packed");
        }
      }
      if (cached && strings) lists_->keep(value, out_.data() + start, out_.data() + out_.size());
    } else if (PyDict_CheckExact(value)) {
      count('d', static_cast<std::size_t>(PyDict_GET_SIZE(value)));
      Py_ssize_t position = 0;
      PyObject* key = nullptr;
      PyObject* item = nullptr;
      const Py_ssize_t size = PyDict_GET_SIZE(value);
      while (PyDict_Next(value, &position, &key, &item)) {
        const auto held_key = py::reinterpret_borrow<py::object>(key);  // as a list's items
        const auto held_item = py::reinterpret_borrow<py::object>(item);
        put(held_key.ptr(), depth + 1);
        put(held_item.ptr(), depth + 1);
        if (PyDict_GET_SIZE(value) != size) {
          throw py::type_error("pack_message: a dict changed while it was packed");
        }
      }
    } else if (Py_TYPE(value) == ndarray_type()) {
      put_array(value);
    } else {
      throw py::type_error(std::string("pack_message: cannot pack a ") + Py_TYPE(value)->tp_name);
    }
  }

  void put_array(PyObject* value) {
    auto array = py::reinterpret_borrow<py::array>(value);
    const py::dtype dtype = array.dtype();
    // The dtype as numpy spells it ('<f8', '|u1'): made from the descriptor's fields for the
    // plain numeric kinds (a lookup of dtype.str costs more than packing the array); a dtype
    // with units or fields (datetimes, structured) is one the core leaves to the Python form.
    const char kind = dtype.kind();
    if (dtype.has_fields() || std::strchr("biufc", kind) == nullptr) {
      throw py::type_error(std::string("pack_message: cannot pack an array of kind '") + kind +
                           "'");
    }
    char order = dtype.byteorder();
    if (order == '=') order = kLittleEndian ? '<' : '>';
    if (dtype.itemsize() == 1) order = '|';
    const std::string dtype_text = order + std::string(1, kind) + std::to_string(dtype.itemsize());
    if (!(array.flags() & py::array::c_style)) {  // a C-ordered copy (a view with strides)
      array = py::array::ensure(array, py::array::c_style);
      if (!array) throw py::error_already_set();
    }
    out_.push_back('a');
    out_.push_back(static_cast<char>(dtype_text.size()));
    out_.insert(out_.end(), dtype_text.begin(), dtype_text.end());
    out_.push_back(static_cast<char>(array.ndim()));
    for (py::ssize_t i = 0; i < array.ndim(); ++i) raw(static_cast<std::int64_t>(array.shape(i)));
    const auto size = static_cast<std::size_t>(array.nbytes());
    raw(static_cast<std::uint64_t>(size));
    const char* data = static_cast<const char*>(array.data());
    out_.insert(out_.end(), data, data + size);
  }

  static PyTypeObject* ndarray_type() {
    // numpy's array type, looked up once (kept for the life of the process, as numpy is).
    static PyTypeObject* type = reinterpret_cast<PyTypeObject*>(
        py::object(py::module_::import("numpy").attr("ndarray")).release().ptr());
    return type;
  }

  std::vector<char> out_;
  StringListCache* lists_ = nullptr;  // this call's (pack_to_buffer)
};

// offset_ns + round(time * 1e9) as Python's max(0, offset + round(time * 1e9)) makes it (half to
// even, never below 0) in `out`; false where int64 cannot hold it (not finite, or past its
// range), for the caller to go Python's way.
bool log_time_ns(double time, std::int64_t offset_ns, std::int64_t& out) {
  const double nanoseconds = std::nearbyint(time * 1e9);
  if (!(std::fabs(nanoseconds) < 9.0e18)) return false;
  std::int64_t stamp = 0;
  if (__builtin_add_overflow(offset_ns, static_cast<std::int64_t>(nanoseconds), &stamp)) {
    return false;
  }
  out = stamp < 0 ? std::int64_t{0} : stamp;
  return true;
}

// pack_message(message), in the calling thread's own buffer (which keeps its size from one
// message to the next; valid until the thread's next call); null, with nothing raised, for a
// message the core does not pack (a TypeError or ValueError of the packer, or over a record's
// 32-bit size): the caller hands it on its own way.
const std::vector<char>* pack_or_decline(PyObject* message, StringListCache* lists = nullptr) {
  thread_local MessagePacker packer;
  const std::vector<char>* packed = nullptr;
  try {
    packed = &packer.pack_to_buffer(message, lists);
  } catch (const py::type_error&) {
    return nullptr;
  } catch (const py::value_error&) {
    return nullptr;
  } catch (py::error_already_set& error) {
    if (!error.matches(PyExc_TypeError) && !error.matches(PyExc_ValueError)) throw;
    return nullptr;
  }
  return packed->size() <= UINT32_MAX ? packed : nullptr;
}

// A block of packed messages for the recording's bag process (pack_direct's, and take()'s for
// push_packed ones; mjfast.interop.record.writer.batch_items reads it): the routes in the order
// first used, how many records each, and per record a DirectRecord (the route's index in the
// block) and the packed bytes. Routes are known here by an id of the caller's; add() needs no
// GIL, result() turns the ids into the routes with `route_of(id)` (GIL held).
class DirectBlock {
 public:
  // True where `route` is new to this block.
  bool add(std::uintptr_t route, std::int64_t stamp_ns, const std::vector<char>& packed) {
    std::uint32_t index = 0;
    const auto known = static_cast<std::uint32_t>(routes_.size());
    while (index < known && routes_[index] != route) ++index;
    if (index == known) {
      routes_.push_back(route);
      counts_.push_back(0);
    }
    ++counts_[index];
    const DirectRecord header{index, stamp_ns, static_cast<std::uint32_t>(packed.size())};
    const char* head = reinterpret_cast<const char*>(&header);
    data_.insert(data_.end(), head, head + sizeof header);
    data_.insert(data_.end(), packed.begin(), packed.end());
    return index == known;
  }

  // (routes, counts, data), and this block empty again (GIL held).
  template <class RouteOf>
  py::tuple result(RouteOf&& route_of) {
    py::list routes;
    py::list counts;
    for (std::size_t i = 0; i < routes_.size(); ++i) {
      routes.append(route_of(routes_[i]));
      counts.append(counts_[i]);
    }
    py::tuple made =
        py::make_tuple(std::move(routes), std::move(counts),
                       py::bytes(data_.data(), static_cast<py::ssize_t>(data_.size())));
    routes_.clear();
    counts_.clear();
    data_.clear();
    return made;
  }

 private:
  std::vector<std::uintptr_t> routes_;
  std::vector<std::size_t> counts_;
  std::vector<char> data_;
};

using Ring = HandoffRing<PyMessage>;

// A wait of `seconds` from Python (take's and wait_ready's timeout); negative: none.
std::chrono::nanoseconds wait_of(double seconds) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::duration<double>(seconds > 0.0 ? seconds : 0.0));
}

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
    return push_item(key_of(topic), payload);
  }

  // push(), but the message is packed now, on the publishing thread, which holds the GIL anyway
  // (a microsecond or so for a JointState), with `route` and its log time offset_ns +
  // round(stamp * 1e9): the writer then takes bytes, and needs the GIL for none of the packing
  // nor for the message's release, which it took a physics thread that needs the GIL every step
  // (a Python plugin's) ~7% of its time to wait for. A message the core does not pack, or a time
  // its nanoseconds cannot hold, goes as push() hands it, in its place in the order.
  bool push_packed(const py::object& topic, const py::object& message, double stamp,
                   const py::object& route, std::int64_t offset_ns) {
    PyMessage payload;
    const std::vector<char>* packed = nullptr;
    if (!log_time_ns(stamp, offset_ns, payload.stamp_ns) ||
        (packed = pack_or_decline(message.ptr(), &string_lists_)) == nullptr) {
      return push(topic, message, stamp);
    }
    // Copied out once: packing straight into the payload's new buffer grew it a few times.
    payload.packed.assign(packed->begin(), packed->end());
    payload.route = route_id(route);
    payload.stamp = stamp;
    return push_item(key_of(topic), payload);
  }

  // What hand_over() calls for each message: `stamp()` (None: 0.0) and `packed_route(topic)`
  // (None: every message as push() hands it), with their log time offset (GIL held; set before
  // the ring is given to a bus, and cleared by close()).
  void set_hand_over(const py::object& stamp, const py::object& packed_route,
                     std::int64_t offset_ns) {
    stamp_ = stamp;
    packed_route_ = packed_route;
    offset_ns_ = offset_ns;
  }

  // A bus tap's whole share of a publish (the bus calls this as the tap's function): the stamp
  // and the route asked for, then push() or push_packed(), with no Python frame between (the
  // physics thread pays each frame on every message: at a 100 Hz JointState of a 5 ms step, a
  // few tenths of a percent of its rate). An error of either callable is the caller's, as a
  // tap's is.
  void hand_over(const py::object& topic, const py::object& message) {
    double stamp = 0.0;
    if (!stamp_.is_none()) {
      const auto made = py::reinterpret_steal<py::object>(PyObject_CallNoArgs(stamp_.ptr()));
      if (!made) throw py::error_already_set();
      stamp = PyFloat_AsDouble(made.ptr());
      if (stamp == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    }
    if (!packed_route_.is_none()) {
      const auto route =
          py::reinterpret_steal<py::object>(PyObject_CallOneArg(packed_route_.ptr(), topic.ptr()));
      if (!route) throw py::error_already_set();
      if (!route.is_none()) {
        push_packed(topic, message, stamp, route, offset_ns_);
        return;
      }
    }
    push(topic, message, stamp);
  }

  // close(): no more pushes, and hand_over's callables let go (they may hold the env that holds
  // this ring's tap).
  void close() {
    ring_.close();
    stamp_ = py::none();
    packed_route_ = py::none();
    string_lists_.clear();
  }

  // Python's garbage collector sees hand_over's callables (tp_traverse, tp_clear).
  int traverse(visitproc visit, void* arg) {
    Py_VISIT(stamp_.ptr());
    Py_VISIT(packed_route_.ptr());
    return 0;
  }
  void clear() {
    stamp_ = py::none();
    packed_route_ = py::none();
  }

  // Up to `max` waiting items, oldest first, waiting up to `timeout_s` (the GIL released) for the
  // first: each pushed message as (topic, message, stamp), and each run of packed ones as one
  // block (None, routes, counts, data), pack_direct's (routes, counts, data), in its place.
  py::list take(std::size_t max, double timeout_s) {
    const std::chrono::nanoseconds timeout = wait_of(timeout_s);
    // Waits for the publishing thread, which may hold the GIL to push: released meanwhile, and
    // while the packed messages are gathered into their blocks (no Python object in them). One
    // taker at a time: taken_ and blocks_ are its scratch space until it returns (a second
    // taker's ring_.take into them freed the first one's messages twice). The taker's mutex is
    // taken with the GIL released and held while taking the GIL back (env_core.h's lock order).
    std::unique_lock<std::mutex> taking(taker_mutex_, std::defer_lock);
    std::vector<DirectBlock>& blocks = blocks_;
    const std::size_t count = without_gil([&] {
      taking.lock();
      const std::size_t taken = ring_.take(taken_, max, timeout);
      blocks.clear();
      bool run = false;
      for (std::size_t i = 0; i < taken; ++i) {
        PyMessage& item = taken_[i].payload;
        if (item.route == kNotPacked) {
          run = false;
          continue;
        }
        if (!run) blocks.emplace_back();
        run = true;
        blocks.back().add(item.route, item.stamp_ns, item.packed);
        std::vector<char>().swap(item.packed);  // (a slot keeps no buffer)
      }
      return taken;
    });
    const auto route_of = [&](std::uintptr_t id) { return routes_[id]; };
    py::list out;
    std::size_t block = 0;
    bool in_run = false;
    std::size_t i = 0;
    try {
      for (; i < count; ++i) {
        PyMessage& item = taken_[i].payload;
        if (item.route != kNotPacked) {  // in its block already
          item.route = kNotPacked;
          if (!in_run) {
            const py::tuple made = blocks[block++].result(route_of);
            out.append(py::make_tuple(py::none(), made[0], made[1], made[2]));
          }
          in_run = true;
          continue;
        }
        in_run = false;
        // The tuple takes over both references.
        auto entry = py::reinterpret_steal<py::tuple>(PyTuple_New(3));
        if (!entry) throw py::error_already_set();
        PyTuple_SET_ITEM(entry.ptr(), 0, std::exchange(item.topic, nullptr));
        PyTuple_SET_ITEM(entry.ptr(), 1, std::exchange(item.message, nullptr));
        PyObject* stamp = PyFloat_FromDouble(item.stamp);
        if (stamp == nullptr) throw py::error_already_set();
        PyTuple_SET_ITEM(entry.ptr(), 2, stamp);
        out.append(std::move(entry));
      }
    } catch (...) {
      for (std::size_t j = i; j < count; ++j) {
        taken_[j].payload.release();
        taken_[j].payload.route = kNotPacked;
      }
      throw;
    }
    return out;
  }

  Ring& ring() { return ring_; }

 private:
  bool push_item(std::uint32_t key, PyMessage& payload) {
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

  // A topic's key: its number in the order topics were first pushed (GIL held).
  std::uint32_t key_of(const py::object& topic) {
    PyObject* found = PyDict_GetItemWithError(keys_.ptr(), topic.ptr());
    if (found != nullptr) return static_cast<std::uint32_t>(PyLong_AsUnsignedLong(found));
    if (PyErr_Occurred()) throw py::error_already_set();
    const auto key = static_cast<std::uint32_t>(PyDict_Size(keys_.ptr()));
    keys_[topic] = key;
    return key;
  }

  // A packed message's route: its number in routes_, the routes by identity in the order first
  // pushed (GIL held; a recording has a few, and a few more after each load).
  std::uint32_t route_id(const py::object& route) {
    for (std::size_t i = 0; i < routes_.size(); ++i) {
      if (routes_[i].ptr() == route.ptr()) return static_cast<std::uint32_t>(i);
    }
    if (routes_.size() >= kNotPacked) throw py::value_error("push_packed: too many routes");
    routes_.push_back(route);
    return static_cast<std::uint32_t>(routes_.size() - 1);
  }

  Ring ring_;
  py::object stamp_ = py::none();         // hand_over's (GIL held to read or change)
  py::object packed_route_ = py::none();  // hand_over's
  std::int64_t offset_ns_ = 0;
  StringListCache string_lists_;  // push_packed's (GIL held)
  py::dict keys_;
  std::vector<py::object> routes_;   // GIL held to read or change
  std::mutex taker_mutex_;           // one take() at a time (env_core.h: 6a)
  std::vector<Ring::Item> taken_;    // the taker's: reused by every take()
  std::vector<DirectBlock> blocks_;  // the taker's: take()'s blocks
};

// A read position in a packed message's bytes (MessageUnpacker's and PackedJointState's).
struct PackedCursor {
  const char* at = nullptr;
  const char* end = nullptr;

  // The next `size` bytes, or null (nothing taken) where fewer are left.
  const char* take(std::size_t size) {
    if (static_cast<std::size_t>(end - at) < size) return nullptr;
    const char* here = at;
    at += size;
    return here;
  }
  template <class T>
  bool read(T& value) {
    const char* bytes = take(sizeof value);
    if (bytes == nullptr) return false;
    std::memcpy(&value, bytes, sizeof value);
    return true;
  }
};

class MessageUnpacker {
 public:
  explicit MessageUnpacker(const py::bytes& packed) : packed_(packed) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(packed.ptr(), &data, &size) != 0) throw py::error_already_set();
    bytes_ = PackedCursor{data, data + size};
    const char* magic = bytes_.take(sizeof kPackMagic);
    if (magic == nullptr || std::memcmp(magic, kPackMagic, sizeof kPackMagic) != 0) {
      throw py::value_error("unpack_message: not a packed message (no MJP1 magic)");
    }
  }

  py::object unpack() {
    py::object value = get();
    if (bytes_.at != bytes_.end) {
      throw py::value_error("unpack_message: bytes left after the message");
    }
    return value;
  }

 private:
  const char* need(std::size_t size) {
    const char* here = bytes_.take(size);
    if (here == nullptr) throw py::value_error("unpack_message: the packed message ends early");
    return here;
  }
  template <class T>
  T raw() {
    T value;
    std::memcpy(&value, need(sizeof(T)), sizeof(T));
    return value;
  }

  py::object get() {
    const char tag = *need(1);
    switch (tag) {
      case 'N': return py::none();
      case 'T': return py::bool_(true);
      case 'F': return py::bool_(false);
      case 'f': return py::float_(raw<double>());
      case 'i': return py::int_(raw<std::int64_t>());
      case 's': {
        const auto size = raw<std::uint32_t>();
        return py::str(need(size), size);
      }
      case 'y': {
        const auto size = raw<std::uint32_t>();
        return py::bytes(need(size), size);
      }
      case 'l': {
        const auto size = raw<std::uint32_t>();
        py::list list(size);
        for (std::uint32_t i = 0; i < size; ++i) list[i] = get();
        return std::move(list);
      }
      case 't': {
        const auto size = raw<std::uint32_t>();
        py::tuple tuple(size);
        for (std::uint32_t i = 0; i < size; ++i) tuple[i] = get();
        return std::move(tuple);
      }
      case 'd': {
        const auto size = raw<std::uint32_t>();
        py::dict dict;
        for (std::uint32_t i = 0; i < size; ++i) {
          py::object key = get();
          dict[key] = get();
        }
        return std::move(dict);
      }
      case 'a': {
        const auto dtype_size = static_cast<unsigned char>(*need(1));
        const std::string dtype_text(need(dtype_size), dtype_size);
        const auto ndim = static_cast<unsigned char>(*need(1));
        std::vector<py::ssize_t> shape(ndim);
        for (auto& extent : shape) extent = static_cast<py::ssize_t>(raw<std::int64_t>());
        const auto size = raw<std::uint64_t>();
        const char* data = need(static_cast<std::size_t>(size));
        py::array array(py::dtype(dtype_text), shape);
        if (static_cast<std::uint64_t>(array.nbytes()) != size) {
          throw py::value_error("unpack_message: an array's bytes do not match its shape");
        }
        std::memcpy(array.mutable_data(), data, static_cast<std::size_t>(size));
        return std::move(array);
      }
      default: throw py::value_error("unpack_message: unknown tag in the packed message");
    }
  }

  py::bytes packed_;  // kept alive while its bytes are read
  PackedCursor bytes_;
};

// ---- a packed JointState as CDR, for the recording's bag process --------------------------------
// joint_state_cdr(packed) -> bytes or None: the CDR (little-endian, encapsulation header first) of
// the sensor_msgs/msg/JointState that conversions.joint_state makes of the bus message `packed`
// holds, as rosbags serialises it (the header's stamp from "time" rounded as conversions.stamp
// rounds it, frame_id "", "name", the three float64 arrays), written from the packed bytes in one
// pass: the bag process's unpacking, conversion and serialisation of each recorded JointState
// (~4 us of its CPU, which it takes beside the physics thread). None for a message it does not
// take exactly as that conversion would (a key missing, a name not a str, an array not 1-D
// float64 in this machine's order, a time not finite or past an int32 of seconds): the caller
// goes the conversion's way, whose error names the fault.
class PackedJointState {
 public:
  explicit PackedJointState(const std::string_view packed)
      : bytes_{packed.data(), packed.data() + packed.size()} {}

  // The CDR, or false where this message is not one it takes.
  bool cdr(std::string& out) {
    out_ = &out;
    if (!read() || !have_time_ || !have_names_ || arrays_found_ != 0b111) return false;
    const double nanoseconds = std::nearbyint(time_ * 1e9);  // (Python's round: half to even)
    if (!std::isfinite(nanoseconds) || !(std::fabs(nanoseconds) < 9.0e18)) return false;
    const auto whole = static_cast<std::int64_t>(nanoseconds);
    std::int64_t seconds = whole / 1000000000;
    std::int64_t rest = whole % 1000000000;
    if (rest < 0) {  // floor division, as conversions.stamp's //
      rest += 1000000000;
      seconds -= 1;
    }
    if (seconds < INT32_MIN || seconds > INT32_MAX) return false;
    out.assign("\x00\x01\x00\x00", 4);
    put(static_cast<std::int32_t>(seconds));
    put(static_cast<std::uint32_t>(rest));
    put(std::uint32_t{1});  // frame_id "": its length with the NUL, then the NUL
    out.push_back('\0');
    align(4);
    put(static_cast<std::uint32_t>(names_.size()));
    for (const std::string_view name : names_) {
      align(4);
      put(static_cast<std::uint32_t>(name.size() + 1));
      out.append(name);
      out.push_back('\0');
    }
    for (const std::string_view data : arrays_) {
      align(4);
      put(static_cast<std::uint32_t>(data.size() / sizeof(double)));
      if (!data.empty()) {
        align(8);
        out.append(data);
      }
    }
    return true;
  }

 private:
  template <class T>
  void put(T value) {
    out_->append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  void align(std::size_t to) {  // (CDR aligns from the end of the encapsulation header)
    while ((out_->size() - 4) % to != 0) out_->push_back('\0');
  }

  bool sized(std::string_view& value) {  // an 's' or 'y' value's bytes, after its tag
    std::uint32_t size = 0;
    const char* at = nullptr;
    if (!bytes_.read(size) || (at = bytes_.take(size)) == nullptr) return false;
    value = std::string_view(at, size);
    return true;
  }

  // An array's parts, after its 'a' tag: its dtype as numpy spells it, its dimensions, the first
  // one's extent (0 for none) and its data.
  bool array_parts(std::string_view& dtype, unsigned& ndim, std::int64_t& extent,
                   std::string_view& data) {
    unsigned char size = 0;
    unsigned char dimensions = 0;
    std::uint64_t length = 0;
    const char* at = nullptr;
    if (!bytes_.read(size) || (at = bytes_.take(size)) == nullptr) return false;
    dtype = std::string_view(at, size);
    if (!bytes_.read(dimensions)) return false;
    ndim = dimensions;
    extent = 0;
    for (unsigned i = 0; i < ndim; ++i) {
      std::int64_t value = 0;
      if (!bytes_.read(value)) return false;
      if (i == 0) extent = value;
    }
    if (!bytes_.read(length) || length > static_cast<std::uint64_t>(bytes_.end - bytes_.at)) {
      return false;
    }
    data = std::string_view(bytes_.take(static_cast<std::size_t>(length)),
                            static_cast<std::size_t>(length));
    return true;
  }

  // One value of any kind, passed over (a key this conversion does not read).
  bool skip(int depth) {
    char kind = 0;
    std::uint32_t size = 0;
    std::string_view unused;
    if (depth > kPackDepth || !bytes_.read(kind)) return false;
    switch (kind) {
      case 'N':
      case 'T':
      case 'F': return true;
      case 'f':
      case 'i': return bytes_.take(8) != nullptr;
      case 's':
      case 'y': return sized(unused);
      case 'l':
      case 't':
        if (!bytes_.read(size)) return false;
        for (std::uint32_t i = 0; i < size; ++i) {
          if (!skip(depth + 1)) return false;
        }
        return true;
      case 'd':
        if (!bytes_.read(size)) return false;
        for (std::uint64_t i = 0; i < 2 * std::uint64_t{size}; ++i) {  // keys and values
          if (!skip(depth + 1)) return false;
        }
        return true;
      case 'a': {
        unsigned ndim = 0;
        std::int64_t extent = 0;
        std::string_view dtype;
        return array_parts(dtype, ndim, extent, unused);
      }
      default: return false;
    }
  }

  // A 1-D float64 array in this machine's order ('<f8' where little-endian), after its 'a' tag.
  bool array(std::string_view& data) {
    unsigned ndim = 0;
    std::int64_t extent = 0;
    std::string_view dtype;
    return kLittleEndian && array_parts(dtype, ndim, extent, data) && ndim == 1 && dtype == "<f8" &&
           extent >= 0 && extent <= UINT32_MAX &&
           data.size() == static_cast<std::uint64_t>(extent) * sizeof(double);
  }

  bool read() {
    char kind = 0;
    std::uint32_t entries = 0;
    const char* magic = bytes_.take(sizeof kPackMagic);
    if (magic == nullptr || std::memcmp(magic, kPackMagic, sizeof kPackMagic) != 0 ||
        !bytes_.read(kind) || kind != 'd' || !bytes_.read(entries)) {
      return false;
    }
    for (std::uint32_t i = 0; i < entries; ++i) {
      std::string_view key;
      if (!bytes_.read(kind)) return false;
      if (kind != 's') {  // (a key of another kind: its value is none of these)
        --bytes_.at;
        if (!skip(1) || !skip(1)) return false;
        continue;
      }
      if (!sized(key)) return false;
      if (key == "time") {
        if (!bytes_.read(kind) || (kind != 'f' && kind != 'i')) return false;
        if (kind == 'f') {
          if (!bytes_.read(time_)) return false;
        } else {
          std::int64_t whole = 0;
          if (!bytes_.read(whole)) return false;
          time_ = static_cast<double>(whole);  // (as Python's int * 1e9 makes it a float first)
        }
        have_time_ = true;
      } else if (key == "name") {
        std::uint32_t count = 0;
        if (!bytes_.read(kind) || kind != 'l' || !bytes_.read(count)) return false;
        names_.clear();
        for (std::uint32_t j = 0; j < count; ++j) {
          std::string_view name;
          if (!bytes_.read(kind) || kind != 's' || !sized(name)) return false;
          names_.push_back(name);
        }
        have_names_ = true;
      } else if (key == "position" || key == "velocity" || key == "effort") {
        const int index = key == "position" ? 0 : key == "velocity" ? 1 : 2;
        if (!bytes_.read(kind) || kind != 'a' || !array(arrays_[index])) return false;
        arrays_found_ |= 1u << index;
      } else if (!skip(1)) {
        return false;
      }
    }
    return bytes_.at == bytes_.end;
  }

  PackedCursor bytes_;
  std::string* out_ = nullptr;
  double time_ = 0.0;
  bool have_time_ = false;
  bool have_names_ = false;
  unsigned arrays_found_ = 0;
  std::vector<std::string_view> names_;
  std::array<std::string_view, 3> arrays_{};
};

HandoffPolicy policy_of(const std::string& name) {
  if (name == "keep_newest") return HandoffPolicy::kKeepNewest;
  if (name == "wait") return HandoffPolicy::kWait;
  throw py::value_error("a handoff ring's policy is 'keep_newest' or 'wait', got '" + name + "'");
}

}  // namespace

void bind_handoff(py::module_& module) {
  // Garbage-collected: hand_over's callables (a recording's stamp reads its env, whose bus holds
  // the tap that holds this ring) would otherwise keep an env that was never closed alive.
  py::class_<PyHandoffRing>(
      module, "HandoffRing", py::custom_type_setup([](PyHeapTypeObject* heap_type) {
        auto* type = &heap_type->ht_type;
        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
        type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) {
#if PY_VERSION_HEX >= 0x03090000
          Py_VISIT(Py_TYPE(self));
#endif
          if (!py::detail::is_holder_constructed(self)) return 0;
          return py::cast<PyHandoffRing&>(py::handle(self)).traverse(visit, arg);
        };
        type->tp_clear = [](PyObject* self) {
          if (py::detail::is_holder_constructed(self)) {
            py::cast<PyHandoffRing&>(py::handle(self)).clear();
          }
          return 0;
        };
      }))
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
      .def("push_packed", &PyHandoffRing::push_packed, py::arg("topic"), py::arg("message"),
           py::arg("stamp"), py::arg("route"), py::arg("offset_ns"),
           "push(), with the message packed now (pack_message) and kept with `route` and the log "
           "time offset_ns + round(stamp * 1e9): take() hands runs of such messages over as "
           "pack_direct's blocks. A message the core does not pack goes as push() hands it.")
      .def("take", &PyHandoffRing::take, py::arg("max") = 64, py::arg("timeout") = 0.0,
           "Up to `max` waiting items: each pushed message as (topic, message, stamp), each run of "
           "packed ones as (None, routes, counts, data), oldest first, waiting up to `timeout` "
           "seconds (the GIL released) for the first.")
      .def("set_hand_over", &PyHandoffRing::set_hand_over, py::arg("stamp"),
           py::arg("packed_route"), py::arg("offset_ns") = 0,
           "What hand_over() calls for each message: stamp() (None: 0.0) and "
           "packed_route(topic) (None, or a route of None: push()), and the packed messages' log "
           "time offset.")
      .def("hand_over", &PyHandoffRing::hand_over, py::arg("topic"), py::arg("message"),
           "A bus tap's function: push_packed() with stamp() and packed_route(topic)'s route "
           "where that is not None, else push() with the stamp.")
      .def("close", &PyHandoffRing::close,
           "Refuses pushes from now on and wakes every waiter (what waits can still be taken); "
           "hand_over's callables are let go.")
      .def(
          "wait_ready",
          [](PyHandoffRing& self, double timeout_s) {
            const std::chrono::nanoseconds timeout = wait_of(timeout_s);
            return without_gil([&] { return self.ring().wait_ready(timeout); });
          },
          py::arg("timeout") = 0.0,
          "Waits up to `timeout` seconds (the GIL released) until an item waits, without taking "
          "it: True when one does, False when the time ran out or the ring is closed and empty.")
      .def_property_readonly("closed", [](PyHandoffRing& self) { return self.ring().closed(); })
      .def_property_readonly("capacity", [](PyHandoffRing& self) { return self.ring().capacity(); })
      .def_property_readonly("waiting", [](PyHandoffRing& self) { return self.ring().waiting(); })
      .def_property_readonly("pushed", [](PyHandoffRing& self) { return self.ring().pushed(); })
      .def_property_readonly("dropped", [](PyHandoffRing& self) { return self.ring().dropped(); })
      .def_property_readonly("waits", [](PyHandoffRing& self) { return self.ring().waits(); });

  module.def(
      "pack_message",
      [](const py::handle& message) {
        thread_local MessagePacker packer;  // its buffer reused by each call on a thread
        return packer.pack(message);
      },
      py::arg("message"),
      "A bus message as bytes (None, bool, int, float, str, bytes, list, tuple, dict and numpy "
      "arrays of a numeric dtype); TypeError for anything else. unpack_message() is its inverse.");
  // The recording's writer thread (mjfast.interop.record.recorder) in one call per batch: its
  // per-message loop in Python held the GIL ~5 us a message, which the physics thread (a Python
  // plugin every step) waited for, ~10% of its time at 10,000 messages a second. The packed
  // messages come back as one block of bytes, not a tuple and a bytes object each: the batch is
  // pickled to the bag's process with the GIL held, and pickling a tuple a message took the
  // writer thread over half as long as packing them (14 ms a second against 24, humanoid).
  module.def(
      "pack_direct",
      [](const py::list& items, const py::dict& direct, std::int64_t offset_ns) {
        DirectBlock block;
        py::list held;  // the routes used, held (their pointers are the block's ids)
        py::list rest;
        // By index, each item held: packing may run Python (numpy's attributes), and the list is
        // the caller's (another thread could change it meanwhile, though none does).
        for (py::ssize_t i = 0; i < PyList_GET_SIZE(items.ptr()); ++i) {
          const auto item = py::reinterpret_borrow<py::object>(PyList_GET_ITEM(items.ptr(), i));
          PyObject* entry = item.ptr();
          if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 3) {
            throw py::type_error("pack_direct: an item is a (topic, message, time) tuple");
          }
          PyObject* route = PyDict_GetItemWithError(direct.ptr(), PyTuple_GET_ITEM(entry, 0));
          if (route == nullptr) {
            if (PyErr_Occurred()) throw py::error_already_set();
            rest.append(item);
            continue;
          }
          // Held while the message is packed (packing may run Python: numpy's attributes).
          const auto held_route = py::reinterpret_borrow<py::object>(route);
          if (!PyTuple_CheckExact(route) || PyTuple_GET_SIZE(route) != 3) {
            throw py::type_error("pack_direct: a route is a (ROS topic, type, convert) tuple");
          }
          const double time = PyFloat_AsDouble(PyTuple_GET_ITEM(entry, 2));
          if (time == -1.0 && PyErr_Occurred()) throw py::error_already_set();
          std::int64_t stamp = 0;
          const std::vector<char>* packed = nullptr;
          if (!log_time_ns(time, offset_ns, stamp) ||
              (packed = pack_or_decline(PyTuple_GET_ITEM(entry, 1))) == nullptr) {
            rest.append(item);  // the caller's way
            continue;
          }
          if (block.add(reinterpret_cast<std::uintptr_t>(route), stamp, *packed)) {
            held.append(held_route);
          }
        }
        return py::make_tuple(block.result([](std::uintptr_t id) {
          return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(id));
        }),
                              std::move(rest));
      },
      py::arg("items"), py::arg("direct"), py::arg("offset_ns"),
      "A writer's batch of [(topic, message, time)]: those whose topic `direct` maps to a route "
      "(ROS topic, type, convert) as one block, (routes, counts, data): the routes used, how many "
      "messages each, and a record per message in `data`, in order: the route's index (uint32), "
      "offset_ns + round(time * 1e9) (int64, never below 0), the size (uint32) and "
      "pack_message(message), native byte order, unpadded; the others (and any the core does "
      "not pack) as they came: (block, rest).");
  module.def(
      "unpack_message", [](const py::bytes& packed) { return MessageUnpacker(packed).unpack(); },
      py::arg("packed"),
      "pack_message()'s inverse (its arrays are new, writable copies); ValueError for bytes it "
      "did not make.");
  module.def(
      "joint_state_cdr",
      [](const py::bytes& packed) -> py::object {
        std::string out;
        if (!PackedJointState(std::string_view(packed)).cdr(out)) return py::none();
        return py::bytes(out);
      },
      py::arg("packed"),
      "The CDR (little-endian, with its encapsulation header) of the sensor_msgs/msg/JointState "
      "that conversions.joint_state makes of the bus message pack_message() packed, as rosbags "
      "serialises it; None for a message it does not take as that conversion would (the caller "
      "converts it then).");
}

}  // namespace mjfast
