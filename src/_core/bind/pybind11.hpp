// The one header through which every binding translation unit sees pybind11, so that all of
// them are compiled with the same configuration (iminuit's pybind11.hpp does the same).
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

#include <chrono>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>

namespace mjfast {

// Whether the interpreter is finalizing (a daemon thread must not touch it any more).
inline bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

// `name` as an interned str, for attribute lookups that run per env or per call:
// `object.attr(interned("x"))`, not `object.attr("x")`. The latter makes a fresh str every
// call, and CPython's type attribute cache keeps the str of each lookup it caches in a slot
// chosen by the str's address: fresh strs stay there (up to 4,096 of them) long after the
// lookup, each holding down the pymalloc arena it was allocated in. Envs created together and
// then closed kept ~80 MB per 1,000 that way (SPEC §18: no more than bare MuJoCo). An interned
// str is one object: its lookups share a slot and keep nothing new.
inline py::str interned(const char* name) {
  PyObject* str = PyUnicode_InternFromString(name);
  if (str == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(str);
}

// The GIL released for a scope, taken back by reacquire() on the normal path. At interpreter exit
// Python ends a daemon thread that asks for the GIL by unwinding it (glibc's forced unwind); an
// unwind that starts inside a destructor (as py::gil_scoped_release's would) aborts the process.
// When the scope is left by an exception instead, the destructor takes the GIL back, unless the
// interpreter is finalizing: then the thread waits for the process to end, as Python 3.14 does.
class GilReleased {
 public:
  GilReleased() : state_(PyEval_SaveThread()) {}
  ~GilReleased() {
    if (state_ == nullptr) return;
    while (python_finalizing()) std::this_thread::sleep_for(std::chrono::hours(1));
    PyEval_RestoreThread(state_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;
  void reacquire() { PyEval_RestoreThread(std::exchange(state_, nullptr)); }

 private:
  PyThreadState* state_;
};

// Runs `work` with the GIL released (see GilReleased); for any binding that a daemon thread may
// be inside when the interpreter exits.
template <class Work>
auto without_gil(Work&& work) -> decltype(work()) {
  GilReleased released;
  if constexpr (std::is_void_v<decltype(work())>) {
    work();
    released.reacquire();
  } else {
    auto result = work();
    released.reacquire();
    return result;
  }
}

// A Python object that C++ keeps and may drop on any thread (a trampoline's registry lookup can
// hold an env alive briefly; the host drops adapters without the GIL): a shared reference whose
// last owner takes the GIL to release it, or leaks it once the interpreter is gone (with its
// objects). The one such holder: EnvCore's bound model and callables, a native plugin's publisher
// and camera opener, RenderCore's scene model.
class GilSafeObject {
 public:
  GilSafeObject() = default;
  explicit GilSafeObject(py::object object)
      : held_(new py::object(std::move(object)), &GilSafeObject::release) {}
  const py::object& get() const { return *held_; }
  explicit operator bool() const { return held_ && *held_; }
  // The shared reference itself, for an owner typed std::shared_ptr<void>.
  std::shared_ptr<void> share() const { return held_; }

 private:
  static void release(py::object* object) {
    if (!Py_IsInitialized()) {
      object->release();  // the interpreter is gone, and its objects with it
      delete object;
      return;
    }
    // Safe: the last owner goes with no lock that a thread holding the GIL may wait for (at most
    // EnvCore's step_mutex_, which comes before the GIL in env_core.h's lock order).
    py::gil_scoped_acquire gil;
    delete object;
  }

  std::shared_ptr<py::object> held_;
};

}  // namespace mjfast
