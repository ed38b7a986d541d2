#include "bind/python_plugin_adapter.h"

#include <stdexcept>

#include "bind/python_scene_registry.h"
#include "common/errors.h"
#include "common/mujoco_guard.h"

namespace mjfast {
namespace {

// The method a plugin of `style` receives `callback` by, or nullptr if that base class has none.
const char* method_of(PythonPluginAdapter::Style style, Callback callback) {
  const CallbackInfo& info = kCallbacks[index_of(callback)];
  return style == PythonPluginAdapter::Style::kMujoco ? info.mujoco_method : info.control_method;
}

std::string python_error_text(const py::error_already_set& error) {
  // Called with the GIL held (every adapter method holds it where Python can raise).
  const py::object& value = error.value();
  return py::str(py::type::of(value).attr("__name__")).cast<std::string>() + ": " +
         py::str(value).cast<std::string>();
}

// KeyboardInterrupt and SystemExit are the user's, not the plugin's failure (SPEC §18).
bool is_interrupt(const py::error_already_set& error) {
  return error.matches(PyExc_KeyboardInterrupt) || error.matches(PyExc_SystemExit);
}

// The C++ exception for `error` of plugin `instance` (GIL held): Interrupted for an interrupt,
// else PythonPluginException.
[[noreturn]] void throw_translated(py::error_already_set error, const py::object& instance) {
  if (is_interrupt(error)) throw Interrupted(std::make_exception_ptr(std::move(error)));
  throw PythonPluginException(std::move(error), instance);
}

// The same for the Python exception now set.
[[noreturn]] void throw_python_error(const py::object& instance) {
  throw_translated(py::error_already_set(), instance);
}

// Runs `call` (with the GIL held) and turns a Python exception into the C++ one above.
template <class Call>
auto translating(const py::object& instance, Call&& call) {
  try {
    return call();
  } catch (py::error_already_set& error) {
    throw_translated(std::move(error), instance);
  }
}

// Whether load()/init() succeeded by what it returned: None (a load that forgets to return) or
// anything true; False, 0, numpy.False_ and other false values fail.
bool loaded_by(const py::object& result, const py::object& instance) {
  if (result.is_none()) return true;
  const int truth = PyObject_IsTrue(result.ptr());
  if (truth < 0) throw_python_error(instance);
  return truth == 1;
}

// The formatted traceback of `error` (GIL held), "" if formatting it fails: a failure record
// is not worth a second failure.
std::string formatted_traceback(const py::error_already_set& error) {
  try {
    py::object lines = py::module_::import("traceback").attr("format_exception")(error.value());
    return py::str("").attr("join")(lines).cast<std::string>();
  } catch (py::error_already_set&) {
    return {};
  }
}

}  // namespace

PythonPluginException::PythonPluginException(py::error_already_set error,
                                             const py::object& instance)
    : std::runtime_error(python_error_text(error)), original(std::move(error)) {
  // A fetched error keeps its traceback apart from the exception object: put it back there, so
  // that the PluginError's __cause__ shows where the plugin raised.
  if (const py::object& trace = original.trace(); trace && original.value()) {
    PyException_SetTraceback(original.value().ptr(), trace.ptr());
  }
  traceback_ = formatted_traceback(original);
  // The traceback is in the failure record (failure.traceback) and, for whoever debugs with the
  // log, here.
  py::module_::import("logging")
      .attr("getLogger")("mjfast.host")
      .attr("debug")("plugin %s raised %s\n%s", py::getattr(instance, "name", py::str("?")),
                     py::str(what()), py::str(traceback_));
}

PythonPluginAdapter::PythonPluginAdapter(py::object instance, Style style, py::object model,
                                         py::object data, py::object control_data, py::object node,
                                         const py::iterable& callbacks, bool stateful)
    : instance_(std::move(instance)),
      style_(style),
      model_(std::move(model)),
      data_(std::move(data)),
      node_(std::move(node)),
      stateful_(stateful) {
  for (py::handle item : callbacks) {
    const auto name = item.cast<std::string>();
    bool known = false;
    for (const CallbackInfo& info : kCallbacks) {
      const char* method = method_of(style_, info.callback);
      if (method == nullptr || name != method) continue;
      const std::size_t slot = index_of(info.callback);
      methods_[slot] = instance_.attr(interned(method));
      switch (info.callback) {
        case Callback::kReset:
          arguments_[slot] = style_ == Style::kMujoco ? py::tuple() : py::make_tuple(data_);
          break;
        case Callback::kPreStep: arguments_[slot] = py::make_tuple(data_); break;
        case Callback::kUpdateRead:
        case Callback::kUpdateWrite: arguments_[slot] = py::make_tuple(model_, control_data); break;
        default: arguments_[slot] = py::make_tuple(model_, data_);
      }
      callbacks_ |= mask_of(info.callback);
      known = true;
    }
    if (!known) throw std::invalid_argument("unknown plugin callback '" + name + "'");
  }
}

PythonPluginAdapter::~PythonPluginAdapter() {
  // The host may drop adapters on a thread that does not hold the GIL; the references must be
  // released with it.
  py::gil_scoped_acquire gil;
  // Every adapter that goes, loaded or not, takes its node's subscriptions and services with it:
  // a plugin that failed to load must not keep receiving messages, nor its successor twice.
  try {
    if (node_ && py::hasattr(node_, interned("shutdown"))) node_.attr(interned("shutdown"))();
  } catch (py::error_already_set& error) {
    py::module_::import("logging")
        .attr("getLogger")("mjfast.host")
        .attr("error")("shutting down the node of a plugin failed: %s", py::str(error.value()));
  }
  for (auto& method : methods_) method = py::object();
  for (auto& arguments : arguments_) arguments = py::object();
  native_ = nullptr;
  native_control_ = py::object();
  due_window_ = nullptr;
  due_window_object_ = py::object();
  node_ = py::object();
  data_ = py::object();
  model_ = py::object();
  instance_ = py::object();
}

void PythonPluginAdapter::call(Callback callback) {
  const std::size_t slot = index_of(callback);
  // Safe: the stepping thread does not hold the GIL here (it released it, or never had it); it is
  // taken only for this call.
  py::gil_scoped_acquire gil;
  PyObject* result = PyObject_Call(methods_[slot].ptr(), arguments_[slot].ptr(), nullptr);
  // A call into mujoco's bindings installs their own MuJoCo error handler around it (mujoco 4.0
  // puts the previous one back after); a guarded mj_step (the caller of the control and passive
  // callbacks) relies on ours being there, whatever a bindings version does.
  mujoco_guard::reinstall();
  if (result == nullptr) throw_python_error(instance_);
  Py_DECREF(result);
}

bool PythonPluginAdapter::load(const mjModel*, mjData*) {
  py::gil_scoped_acquire gil;  // load runs under the host mutex on a thread that released the GIL
  py::object result = translating(instance_, [&] {
    const py::object method = instance_.attr(interned(method_for(Lifecycle::kLoad)));
    return style_ == Style::kMujoco ? method(model_, data_) : method(node_, model_, data_);
  });
  if (!loaded_by(result, instance_)) return false;
  // A compiled per-step controller the plugin hands over (bind_controllers.cc): from now on its
  // control() is the plugin's control callback (direct() below).
  py::object native = py::getattr(instance_, interned("__mjfast_native_control__"), py::none());
  if (!native.is_none()) {
    if (!py::isinstance<NativeControl>(native)) {
      throw std::invalid_argument(
          "__mjfast_native_control__ must be a mjfast._core.NativeControl (a compiled "
          "controller), got " +
          py::str(py::type::of(native).attr("__name__")).cast<std::string>());
    }
    native_ = native.cast<NativeControl*>();
    native_control_ = std::move(native);
  }
  // A rate plugin's window of times with nothing due (plugin_host/due_window.h), which it keeps
  // up to date itself: its last_stage_callback is called at the other steps only.
  py::object window = py::getattr(instance_, interned("__mjfast_due_window__"), py::none());
  if (!window.is_none()) {
    if (!py::isinstance<DueWindow>(window)) {
      throw std::invalid_argument(
          "__mjfast_due_window__ must be a mjfast._core.DueWindow, got " +
          py::str(py::type::of(window).attr("__name__")).cast<std::string>());
    }
    due_window_ = window.cast<const DueWindow*>();
    due_window_object_ = std::move(window);
  }
  return true;
}

DirectCallback PythonPluginAdapter::direct(Callback callback) {
  if (callback != Callback::kControl || native_ == nullptr) return {};
  return {&NativeControl::entry, native_, nullptr};
}

std::map<std::string, double> PythonPluginAdapter::statistics() {
  py::gil_scoped_acquire gil;  // load phases run under the host's mutexes, with the GIL released
  py::object result = translating(
      instance_, [&] { return instance_.attr(interned(method_for(Lifecycle::kStatistics)))(); });
  const auto bad = [&](const std::string& what) {
    return std::invalid_argument("statistics() must return a dict of str to real numbers, got " +
                                 what);
  };
  if (!py::isinstance<py::dict>(result)) {
    throw bad(py::str(py::type::of(result).attr("__name__")).cast<std::string>());
  }
  std::map<std::string, double> figures;
  for (auto item : py::reinterpret_borrow<py::dict>(result)) {
    if (!py::isinstance<py::str>(item.first)) {
      throw bad("a key " + py::repr(item.first).cast<std::string>());
    }
    const auto key = item.first.cast<std::string>();
    PyObject* value = item.second.ptr();
    // bool is an int, and complex or str would not be a figure: a real number, or an error.
    if (PyBool_Check(value) ||
        !(PyFloat_Check(value) || PyLong_Check(value) ||
          PyObject_HasAttrString(value, "__float__")) ||
        PyComplex_Check(value)) {
      throw bad(key + ": " + py::repr(item.second).cast<std::string>());
    }
    const double number = PyFloat_AsDouble(value);
    if (number == -1.0 && PyErr_Occurred()) throw_python_error(instance_);
    figures[key] = number;
  }
  return figures;
}

bool PythonPluginAdapter::activate() {
  py::gil_scoped_acquire gil;  // as statistics()
  return loaded_by(
      translating(instance_,
                  [&] { return instance_.attr(interned(method_for(Lifecycle::kActivate)))(); }),
      instance_);
}

void PythonPluginAdapter::render(const mjModel*, mjData*, mjvScene* scene) {
  py::gil_scoped_acquire gil;  // see call()
  py::object python_scene = python_scene_for(scene);
  if (python_scene.is_none()) {
    throw std::runtime_error("render_callback: this scene has no mujoco.MjvScene counterpart");
  }
  PyObject* result =
      PyObject_CallFunctionObjArgs(methods_[index_of(Callback::kRender)].ptr(), model_.ptr(),
                                   data_.ptr(), python_scene.ptr(), nullptr);
  mujoco_guard::reinstall();  // see call()
  if (result == nullptr) throw_python_error(instance_);
  Py_DECREF(result);
}

void PythonPluginAdapter::geom_changed(const mjModel*, mjData*, int geom_id) {
  py::gil_scoped_acquire gil;  // see call()
  translating(instance_,
              [&] { return methods_[index_of(Callback::kGeomChanged)](model_, data_, geom_id); });
}

const char* PythonPluginAdapter::method_for(Lifecycle step) const {
  const LifecycleInfo& info = kLifecycle[static_cast<std::size_t>(step)];
  return style_ == Style::kMujoco ? info.mujoco_method : info.control_method;
}

const char* PythonPluginAdapter::name_of(Callback callback) const {
  const char* method = method_of(style_, callback);
  return method != nullptr ? method : callback_name(callback);
}

namespace {

// mjfast.model.state's encode_value / decode_value (GIL held). Kept for the life of the process,
// like the module: never released, so never released without the GIL at exit.
const py::object& state_codec(bool encode) {
  static const py::object* encoder = nullptr;
  static const py::object* decoder = nullptr;
  if (encoder == nullptr) {
    const py::module_ module = py::module_::import("mjfast.model.state");
    encoder = new py::object(module.attr("encode_value"));
    decoder = new py::object(module.attr("decode_value"));
  }
  return encode ? *encoder : *decoder;
}

}  // namespace

std::string PythonPluginAdapter::get_state() {
  // The host calls it with its mutexes held and the GIL released, stepping paused.
  py::gil_scoped_acquire gil;
  return translating(instance_, [&] {
    py::object value = instance_.attr(interned(method_for(Lifecycle::kGetState)))();
    mujoco_guard::reinstall();  // see call()
    return state_codec(true)(value).cast<std::string>();
  });
}

void PythonPluginAdapter::set_state(const std::string& value) {
  py::gil_scoped_acquire gil;  // as get_state()
  translating(instance_, [&] {
    py::object decoded = state_codec(false)(py::bytes(value));
    instance_.attr(interned(method_for(Lifecycle::kSetState)))(decoded);
    mujoco_guard::reinstall();
    return 0;
  });
}

void PythonPluginAdapter::unload() {
  py::gil_scoped_acquire gil;  // quiesce runs under the host's mutexes, with the GIL released
  const char* method = method_for(Lifecycle::kUnload);
  try {
    instance_.attr(interned(method))();
  } catch (py::error_already_set& error) {
    // Unload must not stop the others from unloading: report it and go on.
    py::module_::import("logging")
        .attr("getLogger")("mjfast.host")
        .attr("error")("plugin %s raised in %s(): %s", instance_.attr("name"), method,
                       py::str(error.value()));
  }
}

}  // namespace mjfast
