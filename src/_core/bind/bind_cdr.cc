// A ROS 2 message's CDR (little-endian, XCDR1 as rmw_zenoh carries it) read straight into the
// bus's form: what mjfast.interop.ros2.conversions.to_dict(rosbags' deserialize_cdr(...)) gives
// (a dict per message in field order, str, int, float, bool, a list per array or sequence of
// strings or messages, a new numpy array per array or sequence of numbers), made in one C++ walk
// where rosbags' generated Python takes ~60 us for a FollowJointTrajectory goal and to_dict ~35
// more, on every goal's round trip. The layout comes from rosbags: mjfast.interop.ros2.cdr
// compiles a type's msgdef into the program this takes (`CdrDecoder(program)`), and the tests
// compare the two on random messages of many types. Bytes it cannot read raise ValueError, and
// the caller reads them with rosbags, whose error names what is wrong.
//
// Alignment as CDR (and rosbags): a primitive at a multiple of its size (8 at most) from the
// start of the body, after the 4-byte encapsulation header; a string's and a sequence's uint32
// length at a multiple of 4; a sequence of primitives aligned for its elements only when it has
// any.
#include <pybind11/numpy.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bind/bindings.h"

namespace mjfast {
namespace {

// What a node of the program is: a primitive (its struct-module code), a string, a fixed-size
// array, a sequence, a message, or a message type's constant.
enum class Kind : std::uint8_t { kPrimitive, kString, kArray, kSequence, kMessage, kConstant };

struct Node {
  Kind kind = Kind::kPrimitive;
  char code = 'd';         // kPrimitive: '?' bool, 'b' int8/byte, 'B' uint8/char, 'h' 'H' 'i' 'I'
                           // 'q' 'Q' integers, 'f' float32, 'd' float64
  std::size_t size = 8;    // kPrimitive: bytes
  std::size_t length = 0;  // kArray: elements
  std::unique_ptr<Node> element;                                     // kArray, kSequence
  std::vector<std::pair<py::object, std::unique_ptr<Node>>> fields;  // kMessage: (name, node)
  py::object dtype;  // kPrimitive: numpy's dtype for an array of it
  py::object value;  // kConstant: the message type's constant (no bytes on the wire)
};

std::size_t primitive_size(char code) {
  switch (code) {
    case '?':
    case 'b':
    case 'B': return 1;
    case 'h':
    case 'H': return 2;
    case 'i':
    case 'I':
    case 'f': return 4;
    case 'q':
    case 'Q':
    case 'd': return 8;
    default:
      throw py::value_error(std::string("CdrDecoder: unknown primitive code '") + code + "'");
  }
}

const char* numpy_type(char code) {
  switch (code) {
    case '?': return "bool";
    case 'b': return "int8";
    case 'B': return "uint8";
    case 'h': return "int16";
    case 'H': return "uint16";
    case 'i': return "int32";
    case 'I': return "uint32";
    case 'q': return "int64";
    case 'Q': return "uint64";
    case 'f': return "float32";
    default: return "float64";
  }
}

// The program: ("p", code) | ("s",) | ("a", length, node) | ("q", node) | ("c", value) |
// ("m", ((name, node), ...)), a constant being a message type's (rosbags makes it a field).
std::unique_ptr<Node> compile(const py::handle& program, int depth) {
  if (depth > 64) throw py::value_error("CdrDecoder: a program nested deeper than 64");
  const auto parts = py::reinterpret_borrow<py::tuple>(program);
  const auto tag = parts[0].cast<std::string>();
  auto node = std::make_unique<Node>();
  if (tag == "p") {
    const auto code = parts[1].cast<std::string>();
    if (code.size() != 1) throw py::value_error("CdrDecoder: a primitive's code is one letter");
    node->kind = Kind::kPrimitive;
    node->code = code[0];
    node->size = primitive_size(node->code);
    node->dtype = py::dtype(numpy_type(node->code));
  } else if (tag == "c") {
    node->kind = Kind::kConstant;
    node->value = parts[1];
  } else if (tag == "s") {
    node->kind = Kind::kString;
  } else if (tag == "a") {
    node->kind = Kind::kArray;
    node->length = parts[1].cast<std::size_t>();
    node->element = compile(parts[2], depth + 1);
  } else if (tag == "q") {
    node->kind = Kind::kSequence;
    node->element = compile(parts[1], depth + 1);
  } else if (tag == "m") {
    node->kind = Kind::kMessage;
    for (const py::handle field : py::reinterpret_borrow<py::tuple>(parts[1])) {
      const auto pair = py::reinterpret_borrow<py::tuple>(field);
      py::str name = pair[0];
      PyObject* interned = name.release().ptr();
      PyUnicode_InternInPlace(&interned);
      node->fields.emplace_back(py::reinterpret_steal<py::object>(interned),
                                compile(pair[1], depth + 1));
    }
  } else {
    throw py::value_error("CdrDecoder: unknown program node '" + tag + "'");
  }
  return node;
}

class Reader {
 public:
  Reader(const char* body, std::size_t size) : body_(body), size_(size) {}

  py::object read(const Node& node) {
    switch (node.kind) {
      case Kind::kPrimitive: return primitive(node);
      case Kind::kString: return string();
      case Kind::kConstant: return node.value;
      case Kind::kArray: return elements(*node.element, node.length);
      case Kind::kSequence: {
        const std::size_t count = length();
        return elements(*node.element, count);
      }
      case Kind::kMessage: {
        py::dict message;
        for (const auto& [name, field] : node.fields) {
          const py::object value = read(*field);
          if (PyDict_SetItem(message.ptr(), name.ptr(), value.ptr()) != 0) {
            throw py::error_already_set();
          }
        }
        return std::move(message);
      }
    }
    throw py::value_error("CdrDecoder: a bad program node");
  }

  std::size_t position() const { return at_; }

 private:
  void align(std::size_t alignment) { at_ = (at_ + alignment - 1) / alignment * alignment; }

  const char* take(std::size_t size) {
    if (at_ > size_ || size > size_ - at_) {
      throw py::value_error("CdrDecoder: the message ends before its last field");
    }
    const char* where = body_ + at_;
    at_ += size;
    return where;
  }

  std::size_t length() {
    align(4);
    std::uint32_t count = 0;
    std::memcpy(&count, take(4), 4);
    return count;
  }

  py::object primitive(const Node& node) {
    align(node.size);
    const char* raw = take(node.size);
    auto as = [raw](auto value) {
      std::memcpy(&value, raw, sizeof value);
      return value;
    };
    switch (node.code) {
      case '?': return py::bool_(raw[0] != 0);
      case 'b': return py::int_(as(std::int8_t{}));
      case 'B': return py::int_(as(std::uint8_t{}));
      case 'h': return py::int_(as(std::int16_t{}));
      case 'H': return py::int_(as(std::uint16_t{}));
      case 'i': return py::int_(as(std::int32_t{}));
      case 'I': return py::int_(as(std::uint32_t{}));
      case 'q': return py::int_(as(std::int64_t{}));
      case 'Q': return py::int_(as(std::uint64_t{}));
      case 'f': return py::float_(static_cast<double>(as(float{})));
      default: return py::float_(as(double{}));
    }
  }

  py::object string() {
    // A uint32 length counting the terminating NUL, then the bytes and the NUL.
    const std::size_t size = length();
    if (size == 0) throw py::value_error("CdrDecoder: a string without its terminating NUL");
    const char* text = take(size);
    if (text[size - 1] != '\0') {
      throw py::value_error("CdrDecoder: a string without its terminating NUL");
    }
    PyObject* value = PyUnicode_DecodeUTF8(text, static_cast<Py_ssize_t>(size - 1), "strict");
    if (value == nullptr) {
      PyErr_Clear();
      throw py::value_error("CdrDecoder: a string that is not UTF-8");
    }
    return py::reinterpret_steal<py::object>(value);
  }

  py::object elements(const Node& element, std::size_t count) {
    if (element.kind == Kind::kPrimitive) {
      if (count > 0) align(element.size);
      if (count > (size_ - std::min(at_, size_)) / element.size) {
        throw py::value_error("CdrDecoder: the message ends before its last field");
      }
      const char* raw = take(count * element.size);
      // A copy of the bytes (pybind11 copies what it is given without a base): the message's
      // own, writable array, as to_dict's callers may keep it past the payload.
      py::array array(py::reinterpret_borrow<py::dtype>(element.dtype),
                      std::vector<py::ssize_t>{static_cast<py::ssize_t>(count)}, raw);
      return std::move(array);
    }
    // Each element takes at least a byte: a count past the bytes left is malformed (and no
    // list of a billion items is made for it).
    if (count > size_ - std::min(at_, size_)) {
      throw py::value_error("CdrDecoder: a sequence longer than the message");
    }
    py::list items(static_cast<py::ssize_t>(count));
    for (std::size_t i = 0; i < count; ++i) {
      py::object item = read(element);
      PyList_SET_ITEM(items.ptr(), static_cast<py::ssize_t>(i), item.release().ptr());
    }
    return std::move(items);
  }

  const char* body_;
  std::size_t size_;
  std::size_t at_ = 0;
};

class CdrDecoder {
 public:
  explicit CdrDecoder(const py::tuple& program) : root_(compile(program, 0)) {
    if (root_->kind != Kind::kMessage) throw py::value_error("CdrDecoder: a program is a message");
  }

  py::object decode(const py::bytes& data) const {
    char* raw = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(data.ptr(), &raw, &size) != 0) throw py::error_already_set();
    // The encapsulation header: CDR_LE is 00 01 (options after it); anything else is left to
    // rosbags.
    if (size < 4 || raw[0] != 0 || raw[1] != 1) {
      throw py::value_error("CdrDecoder: not little-endian CDR (encapsulation 00 01)");
    }
    Reader reader(raw + 4, static_cast<std::size_t>(size) - 4);
    py::object message = reader.read(*root_);
    // As rosbags: at most the padding to a multiple of 4 may follow the message.
    if (reader.position() + 3 < static_cast<std::size_t>(size) - 4) {
      throw py::value_error("CdrDecoder: bytes left after the message");
    }
    return message;
  }

 private:
  std::unique_ptr<Node> root_;
};

}  // namespace

void bind_cdr(py::module_& module) {
  py::class_<CdrDecoder>(module, "CdrDecoder",
                         "A ROS 2 type's little-endian CDR read into the bus's form (dicts, lists, "
                         "numpy arrays): mjfast.interop.ros2.cdr.dict_decoder(ros_type) makes one "
                         "from the type's rosbags msgdef.")
      .def(py::init<const py::tuple&>(), py::arg("program"))
      .def("decode", &CdrDecoder::decode, py::arg("data"),
           "The message of `data` (its encapsulation header first); ValueError for bytes it "
           "cannot read.");
}

}  // namespace mjfast
