// mjfast native plugins in C++: a thin, header-only layer over the C ABI of plugin_abi.h.
//
//   #include <mjfast/plugin.hpp>
//   class MyPlugin : public mjfast::Plugin {
//    public:
//     explicit MyPlugin(const mjfast::PluginContext& context) : Plugin(context),
//         gain_(context.config.number("gains.kp")) {}          // throws if missing or mistyped
//     bool load(const mjModel* m, mjData* d) override { return true; }
//     void control(const mjModel* m, mjData* d) override { d->ctrl[0] = -gain_ * d->qpos[0]; }
//    private:
//     double gain_;
//   };
//   MJFAST_PLUGIN(MyPlugin)   // exports `mjfast_plugin_MyPlugin`
//
// Only the callbacks a class overrides are dispatched (detected at compile time). Exceptions
// thrown by the constructor or any callback are caught in the generated C shim and reach Python
// as a load failure or an mjfast.PluginError whose cause is a RuntimeError with what() (an
// mjfast.LogicError for a std::logic_error).
//
// Cameras (SPEC section 10): from load(), `camera_ = open_offscreen_camera("front");` returns a
// mjfast::Camera with the Python handle's methods; `camera_.take_latest()` in last_stage yields a
// mjfast::FrameLease (RAII: the frame is never overwritten or freed while the lease lives).
// Errors are rethrown with SPEC section 10's messages: std::runtime_error
// ("camera is unavailable during reload") or std::logic_error.
//
// Simulation requests (SPEC section 13): `request_pause()` / `request_reset("home")` from any
// callback ask the env to pause its physics thread or reset the world at its next step boundary.
//
// Publishing: `publish("~scan", mjfast::Message().scalar("time", d->time).array(...))` puts a dict
// on the env's bus (numpy arrays for arrays), taking the GIL only for that publication.
#pragma once

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <initializer_list>
#include <locale>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "plugin_abi.h"

#if defined(_WIN32)
#define MJFAST_PLUGIN_EXPORT extern "C" __declspec(dllexport)
#else
#define MJFAST_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace mjfast {

// ------------------------------------------------------------------------------------------------
// Configuration: the plugin's entry of MujocoPlugins (minus `type`/`name`), as a JSON tree.

class Config {
 public:
  enum class Kind { kNull, kBool, kNumber, kString, kList, kMapping };

  Config() = default;
  // Parses JSON text (mjfast passes the configuration this way); throws std::runtime_error.
  static Config parse(const std::string& json) {
    Parser parser{json, 0};
    Config root = parser.value("");
    parser.skip_space();
    if (parser.pos != json.size()) parser.fail("trailing characters");
    return root;
  }

  Kind kind() const { return kind_; }
  const std::string& path() const { return path_; }
  bool is_null() const { return kind_ == Kind::kNull; }
  bool is_number() const { return kind_ == Kind::kNumber; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_list() const { return kind_ == Kind::kList; }
  // A number written without a fraction or an exponent ("3", not "3.0" or "3e0"): what Python's
  // json writes for an int, so that a plugin can refuse 3.0 where Python code would.
  bool is_integer_literal() const { return kind_ == Kind::kNumber && integral_; }
  bool is_mapping() const { return kind_ == Kind::kMapping; }

  // Typed values of this node; a mismatch throws "config key '<path>' must be a <kind>, got
  // <kind>".
  double as_number() const {
    expect(Kind::kNumber);
    return number_;
  }
  // An integral number that fits an int; anything else throws
  // "config key '<path>' must be an integer, got 2.5" (casting it would be undefined behaviour).
  int as_int() const {
    const double value = as_number();
    if (!std::isfinite(value) || value != std::floor(value)) {
      throw error("must be an integer, got " + format_number(value));
    }
    if (value < static_cast<double>(INT_MIN) || value > static_cast<double>(INT_MAX)) {
      throw error("must be an integer in [" + std::to_string(INT_MIN) + ", " +
                  std::to_string(INT_MAX) + "], got " + format_number(value));
    }
    return static_cast<int>(value);
  }
  bool as_bool() const {
    expect(Kind::kBool);
    return bool_;
  }
  const std::string& as_string() const {
    expect(Kind::kString);
    return string_;
  }
  std::vector<double> as_numbers() const {
    expect(Kind::kList);
    std::vector<double> values;
    for (const Config& item : list_) values.push_back(item.as_number());
    return values;
  }

  // Lists.
  std::size_t size() const {
    if (kind_ == Kind::kMapping) return mapping_.size();
    expect(Kind::kList);
    return list_.size();
  }
  const Config& operator[](std::size_t index) const {
    expect(Kind::kList);
    if (index >= list_.size()) {
      throw error("has " + std::to_string(list_.size()) + " items, index " + std::to_string(index) +
                  " is out of range");
    }
    return list_[index];
  }
  const std::vector<Config>& items() const {
    expect(Kind::kList);
    return list_;
  }

  // Mappings. `key` may be a dotted path ("gains.kp"); a missing key throws
  // "config key '<path>' is missing".
  bool has(const std::string& key) const { return find(key) != nullptr; }
  const Config& at(const std::string& key) const {
    const Config* found = find(key);
    if (found == nullptr) throw missing(key);
    return *found;
  }
  std::vector<std::string> keys() const {
    expect(Kind::kMapping);
    std::vector<std::string> result;
    for (const auto& entry : mapping_) result.push_back(entry.first);
    return result;
  }

  double number(const std::string& key) const { return at(key).as_number(); }
  double number(const std::string& key, double fallback) const {
    return has(key) ? at(key).as_number() : fallback;
  }
  int integer(const std::string& key) const { return at(key).as_int(); }
  int integer(const std::string& key, int fallback) const {
    return has(key) ? at(key).as_int() : fallback;
  }
  bool boolean(const std::string& key) const { return at(key).as_bool(); }
  bool boolean(const std::string& key, bool fallback) const {
    return has(key) ? at(key).as_bool() : fallback;
  }
  std::string string(const std::string& key) const { return at(key).as_string(); }
  std::string string(const std::string& key, const std::string& fallback) const {
    return has(key) ? at(key).as_string() : fallback;
  }
  std::vector<double> numbers(const std::string& key) const { return at(key).as_numbers(); }

  static const char* kind_name(Kind kind) {
    switch (kind) {
      case Kind::kNull: return "null";
      case Kind::kBool: return "bool";
      case Kind::kNumber: return "number";
      case Kind::kString: return "string";
      case Kind::kList: return "list";
      case Kind::kMapping: return "mapping";
    }
    return "unknown";
  }

 private:
  struct Parser {
    const std::string& text;
    std::size_t pos;

    [[noreturn]] void fail(const std::string& what) const {
      throw std::runtime_error("invalid plugin configuration JSON at offset " +
                               std::to_string(pos) + ": " + what);
    }
    void skip_space() {
      while (pos < text.size() && std::strchr(" \t\r\n", text[pos]) != nullptr) ++pos;
    }
    bool consume(const char* word) {
      const std::size_t n = std::strlen(word);
      if (text.compare(pos, n, word) != 0) return false;
      pos += n;
      return true;
    }
    static std::string child(const std::string& parent, const std::string& key) {
      return parent.empty() ? key : parent + "." + key;
    }
    // A mapping's or list's items, from its opening bracket through `close`: `item()` reads one,
    // and items are separated by ','.
    template <class Item>
    void items(char close, Item&& item) {
      ++pos;
      skip_space();
      if (pos < text.size() && text[pos] == close) {
        ++pos;
        return;
      }
      while (true) {
        item();
        skip_space();
        if (pos < text.size() && text[pos] == ',') {
          ++pos;
          continue;
        }
        if (pos < text.size() && text[pos] == close) {
          ++pos;
          return;
        }
        fail(std::string("expected ',' or '") + close + "'");
      }
    }
    Config value(const std::string& path) {
      skip_space();
      if (pos >= text.size()) fail("unexpected end");
      Config node;
      node.path_ = path;
      const char c = text[pos];
      if (c == '{') {
        node.kind_ = Kind::kMapping;
        items('}', [&] {
          skip_space();
          if (pos >= text.size() || text[pos] != '"') fail("expected a key");
          std::string key = string_literal();
          skip_space();
          if (pos >= text.size() || text[pos] != ':') fail("expected ':'");
          ++pos;
          node.mapping_[key] = value(child(path, key));
        });
        return node;
      }
      if (c == '[') {
        node.kind_ = Kind::kList;
        items(']', [&] {
          node.list_.push_back(value(path + "[" + std::to_string(node.list_.size()) + "]"));
        });
        return node;
      }
      if (c == '"') {
        node.kind_ = Kind::kString;
        node.string_ = string_literal();
        return node;
      }
      if (consume("true")) {
        node.kind_ = Kind::kBool;
        node.bool_ = true;
        return node;
      }
      if (consume("false")) {
        node.kind_ = Kind::kBool;
        node.bool_ = false;
        return node;
      }
      if (consume("null")) return node;
      node.kind_ = Kind::kNumber;
      // Python's json module writes these for non-finite floats.
      if (consume("NaN")) {
        node.number_ = std::nan("");
        return node;
      }
      if (consume("Infinity")) {
        node.number_ = HUGE_VAL;
        return node;
      }
      if (consume("-Infinity")) {
        node.number_ = -HUGE_VAL;
        return node;
      }
      const std::size_t start = pos;
      node.number_ = number_literal();
      node.integral_ = text.find_first_of(".eE", start) >= pos;
      return node;
    }
    // A JSON number, read independently of the process locale (strtod would stop at the '.' of
    // "0.5" under a locale whose decimal point is ',').
    double number_literal() {
      const std::size_t start = pos;
      if (pos < text.size() && text[pos] == '-') ++pos;
      if (!digit()) {
        pos = start;
        fail("unexpected character");
      }
      if (text[pos] == '0') {
        ++pos;
      } else {
        while (digit()) ++pos;
      }
      if (pos < text.size() && text[pos] == '.') {
        ++pos;
        if (!digit()) fail("expected a digit after '.'");
        while (digit()) ++pos;
      }
      if (pos < text.size() && (text[pos] == 'e' || text[pos] == 'E')) {
        ++pos;
        if (pos < text.size() && (text[pos] == '+' || text[pos] == '-')) ++pos;
        if (!digit()) fail("expected a digit in the exponent");
        while (digit()) ++pos;
      }
      const char* first = text.data() + start;
      const char* last = text.data() + pos;
      double value = 0.0;
#if defined(__cpp_lib_to_chars) && __cpp_lib_to_chars >= 201611L
      const std::from_chars_result result = std::from_chars(first, last, value);
      const bool ok = result.ec == std::errc() && result.ptr == last;
#else
      // No floating-point from_chars (older libstdc++, libc++): a stream in the classic locale.
      std::istringstream stream(std::string(first, last));
      stream.imbue(std::locale::classic());
      stream >> value;
      const bool ok = !stream.fail();
#endif
      if (!ok) {
        pos = start;
        fail("number " + std::string(first, last) + " is out of the range of a double");
      }
      return value;
    }
    bool digit() const { return pos < text.size() && text[pos] >= '0' && text[pos] <= '9'; }
    std::string string_literal() {
      ++pos;  // opening quote
      std::string out;
      while (pos < text.size() && text[pos] != '"') {
        char c = text[pos++];
        if (c != '\\') {
          out += c;
          continue;
        }
        if (pos >= text.size()) fail("unterminated escape");
        c = text[pos++];
        switch (c) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case '"':
          case '\\':
          case '/': out += c; break;
          case 'u': {
            const std::size_t escape = pos - 2;  // the backslash, for the messages
            unsigned code = hex4(escape);
            if (code >= 0xDC00 && code <= 0xDFFF) {
              pos = escape;
              fail("unpaired low surrogate " + text.substr(escape, 6));
            }
            if (code >= 0xD800 && code <= 0xDBFF) {
              if (text.compare(pos, 2, "\\u") != 0) {
                pos = escape;
                fail("high surrogate " + text.substr(escape, 6) +
                     " is not followed by a \\u low surrogate escape");
              }
              const std::size_t second = pos;
              pos += 2;
              const unsigned low = hex4(second);
              if (low < 0xDC00 || low > 0xDFFF) {
                pos = escape;
                fail("high surrogate " + text.substr(escape, 6) + " is followed by " +
                     text.substr(second, 6) + ", not a low surrogate (\\uDC00-\\uDFFF)");
              }
              code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
            }
            append_utf8(out, code);
            break;
          }
          default: pos -= 2; fail(std::string("invalid escape '\\") + c + "'");
        }
      }
      if (pos >= text.size()) fail("unterminated string");
      ++pos;  // closing quote
      return out;
    }
    // The 4 hex digits after a "\u" (pos is on the first); `escape` is the backslash's offset.
    unsigned hex4(std::size_t escape) {
      unsigned code = 0;
      for (int i = 0; i < 4; ++i, ++pos) {
        const char h = pos < text.size() ? text[pos] : '\0';
        unsigned nibble = 0;
        if (h >= '0' && h <= '9') {
          nibble = static_cast<unsigned>(h - '0');
        } else if (h >= 'a' && h <= 'f') {
          nibble = static_cast<unsigned>(h - 'a' + 10);
        } else if (h >= 'A' && h <= 'F') {
          nibble = static_cast<unsigned>(h - 'A' + 10);
        } else {
          const std::size_t available = std::min<std::size_t>(6, text.size() - escape);
          pos = escape;
          fail("invalid \\u escape '" + text.substr(escape, available) +
               "': expected 4 hex digits");
        }
        code = code << 4 | nibble;
      }
      return code;
    }
    static void append_utf8(std::string& out, unsigned code) {
      if (code < 0x80) {
        out += static_cast<char>(code);
      } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      } else {
        out += static_cast<char>(0xF0 | (code >> 18));
        out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (code & 0x3F));
      }
    }
  };

  // Shortest-ish text of a number for messages, in the classic locale ("2.5", "3e+09").
  static std::string format_number(double value) {
    std::ostringstream stream;
    stream.imbue(std::locale::classic());
    stream.precision(15);
    stream << value;
    return stream.str();
  }
  std::runtime_error error(const std::string& what) const {
    return std::runtime_error("config key '" + (path_.empty() ? std::string("<root>") : path_) +
                              "' " + what);
  }
  void expect(Kind kind) const {
    if (kind_ != kind) {
      throw error(std::string("must be a ") + kind_name(kind) + ", got " + kind_name(kind_));
    }
  }
  std::runtime_error missing(const std::string& key) const {
    return std::runtime_error("config key '" + Parser::child(path_, key) + "' is missing");
  }
  const Config* find(const std::string& key) const {
    const Config* node = this;
    std::size_t start = 0;
    while (true) {
      const std::size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
      if (node->kind_ != Kind::kMapping) {
        if (node == this) expect(Kind::kMapping);
        // An intermediate value that is not a mapping: name it and what it is.
        throw node->error(std::string("must be a mapping, got ") + kind_name(node->kind_));
      }
      auto it = node->mapping_.find(part);
      if (it == node->mapping_.end()) return nullptr;
      node = &it->second;
      if (dot == std::string::npos) return node;
      start = dot + 1;
    }
  }

  Kind kind_ = Kind::kNull;
  std::string path_;
  bool bool_ = false;
  double number_ = 0.0;
  bool integral_ = false;
  std::string string_;
  std::vector<Config> list_;
  std::map<std::string, Config> mapping_;
};

// ------------------------------------------------------------------------------------------------
// Cameras: C++ owners of the host table's handles (mjfast_host_api).

namespace detail {
// Rethrows a host call's failure as the C++ exception of its kind.
inline void check_host(int status, const mjfast_error& error) {
  if (status == MJFAST_OK) return;
  const std::string message = error.message[0] ? error.message : "mjfast host call failed";
  if (status == MJFAST_LOGIC_ERROR) throw std::logic_error(message);
  throw std::runtime_error(message);
}

// Owns one handle the host table gave out; move-only, handed back through the table's `Release`
// entry (which never fails) when reset, reassigned or destroyed. A moved-from owner is empty.
template <class Handle, void (*mjfast_host_api::*Release)(Handle*)>
class HostHandle {
 public:
  HostHandle() = default;
  HostHandle(const mjfast_host_api* host, Handle* handle) : host_(host), handle_(handle) {}
  ~HostHandle() { reset(); }
  HostHandle(HostHandle&& other) noexcept { *this = std::move(other); }
  HostHandle& operator=(HostHandle&& other) noexcept {
    if (this != &other) {
      reset();
      host_ = other.host_;
      handle_ = std::exchange(other.handle_, nullptr);
    }
    return *this;
  }
  HostHandle(const HostHandle&) = delete;
  HostHandle& operator=(const HostHandle&) = delete;

  const mjfast_host_api* host() const { return host_; }
  Handle* get() const { return handle_; }
  void reset() {
    if (handle_ != nullptr) (host_->*Release)(std::exchange(handle_, nullptr));
  }

 private:
  const mjfast_host_api* host_ = nullptr;
  Handle* handle_ = nullptr;
};
}  // namespace detail

enum class Plane : int {
  kRgb = MJFAST_PLANE_RGB,
  kDepth = MJFAST_PLANE_DEPTH,
  kSegmentation = MJFAST_PLANE_SEGMENTATION,
};

// One leased frame; move-only, released when destroyed (or by release()). Empty when
// Camera::take_latest found no new frame: test it with `if (lease)`.
class FrameLease {
 public:
  FrameLease() = default;
  FrameLease(const mjfast_host_api* host, mjfast_frame_lease* lease, const mjfast_frame_view& view)
      : lease_(host, lease), view_(view) {}

  explicit operator bool() const { return lease_.get() != nullptr; }
  void release() { lease_.reset(); }

  // Valid while the lease is held.
  const void* data() const { return view_.data; }
  std::size_t size() const { return view_.size; }
  Plane plane() const { return static_cast<Plane>(view_.plane); }
  int width() const { return view_.width; }
  int height() const { return view_.height; }
  std::int64_t simulation_time_ns() const { return view_.simulation_time_ns; }
  std::uint64_t capture_id() const { return view_.capture_id; }
  std::uint64_t frame_generation() const { return view_.frame_generation; }

 private:
  detail::HostHandle<mjfast_frame_lease, &mjfast_host_api::lease_release> lease_;
  mjfast_frame_view view_{};
};

// An offscreen camera handle; move-only, closed when destroyed. Default-constructed: none.
class Camera {
 public:
  Camera() = default;
  Camera(const mjfast_host_api* host, mjfast_camera* camera) : camera_(host, camera) {}

  explicit operator bool() const { return camera_.get() != nullptr; }
  void close() { camera_.reset(); }

  void set_geom_group(int group, bool enabled) {
    call(&mjfast_host_api::camera_set_geom_group, group, int{enabled});
  }
  void set_visual_flag(int flag, bool enabled) {  // flag: an mjtVisFlag
    call(&mjfast_host_api::camera_set_visual_flag, flag, int{enabled});
  }
  void enable_frames(int history = 1) { call(&mjfast_host_api::camera_enable_frames, history); }
  bool geom_group_enabled(int group) {
    return query(&mjfast_host_api::camera_geom_group_enabled, group);
  }
  bool visual_flag_enabled(int flag) {
    return query(&mjfast_host_api::camera_visual_flag_enabled, flag);
  }
  bool plane_configured(Plane plane) {
    return query(&mjfast_host_api::camera_plane_configured, static_cast<int>(plane));
  }
  // The newest completed frame newer than the last one taken; an empty lease if none.
  FrameLease take_latest(Plane plane = Plane::kRgb) {
    mjfast_frame_lease* lease = nullptr;
    mjfast_frame_view view{};
    call(&mjfast_host_api::camera_take_latest, static_cast<int>(plane), &lease, &view);
    if (lease == nullptr) return FrameLease();
    return FrameLease(camera_.host(), lease, view);
  }

 private:
  // Calls the host table's `entry` on this camera with `args` and an error record, rethrowing a
  // failure; a closed, moved-from or default-constructed camera throws before the host is asked.
  template <class Entry, class... Args>
  void call(Entry mjfast_host_api::* entry, Args... args) {
    mjfast_camera* camera = camera_.get();
    if (camera == nullptr) throw std::logic_error("mjfast::Camera used after close() or a move");
    mjfast_error error{};
    detail::check_host((camera_.host()->*entry)(camera, args..., &error), error);
  }
  // A yes/no the host writes through an `int*` out-parameter after `args`.
  template <class Entry, class... Args>
  bool query(Entry mjfast_host_api::* entry, Args... args) {
    int result = 0;
    call(entry, args..., &result);
    return result != 0;
  }

  detail::HostHandle<mjfast_camera, &mjfast_host_api::camera_close> camera_;
};

// ------------------------------------------------------------------------------------------------
// Publishing: a message as typed fields (mjfast_message_field) that the host turns into a dict.

// Built field by field; scalars and strings are copied into the message, arrays are referenced
// (their memory must stay valid until publish() returns; the host copies them).
//   mjfast::Message message;
//   message.scalar("time", d->time).array("ranges", ranges.data(), {n}).string("frame", "lidar");
//   publish("~scan", message);
class Message {
 public:
  Message() = default;
  // Fields point into this message's own storage: copying would leave them pointing at the
  // original's; moving keeps them (a deque's elements do not move with it).
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  Message(Message&&) = default;
  Message& operator=(Message&&) = default;

  Message& scalar(const char* key, double value) {
    doubles_.push_back(value);
    return add(key, MJFAST_FIELD_FLOAT64, &doubles_.back(), {});
  }
  Message& integer(const char* key, std::int64_t value) {
    integers_.push_back(value);
    return add(key, MJFAST_FIELD_INT64, &integers_.back(), {});
  }
  Message& string(const char* key, std::string value) {
    strings_.push_back(std::move(value));
    return add(key, MJFAST_FIELD_STRING, strings_.back().c_str(), {});
  }
  Message& array(const char* key, const double* data, std::initializer_list<std::int64_t> shape) {
    return add(key, MJFAST_FIELD_FLOAT64, data, shape);
  }
  Message& array(const char* key, const float* data, std::initializer_list<std::int64_t> shape) {
    return add(key, MJFAST_FIELD_FLOAT32, data, shape);
  }
  Message& array(const char* key, const std::int32_t* data,
                 std::initializer_list<std::int64_t> shape) {
    return add(key, MJFAST_FIELD_INT32, data, shape);
  }
  void clear() {
    fields_.clear();
    keys_.clear();
    doubles_.clear();
    integers_.clear();
    strings_.clear();
  }
  const std::vector<mjfast_message_field>& fields() const { return fields_; }

 private:
  Message& add(const char* key, std::int32_t type, const void* data,
               std::initializer_list<std::int64_t> shape) {
    if (shape.size() > MJFAST_FIELD_MAX_DIMS) {
      throw std::invalid_argument(std::string("message field '") + key + "' has more than " +
                                  std::to_string(MJFAST_FIELD_MAX_DIMS) + " dimensions");
    }
    keys_.emplace_back(key);
    mjfast_message_field field{};
    field.key = keys_.back().c_str();
    field.type = type;
    field.ndim = static_cast<std::int32_t>(shape.size());
    std::copy(shape.begin(), shape.end(), field.shape);
    field.data = data;
    fields_.push_back(field);
    return *this;
  }

  // Deques: growing them never moves the elements that fields already point at.
  std::vector<mjfast_message_field> fields_;
  std::deque<std::string> keys_;
  std::deque<double> doubles_;
  std::deque<std::int64_t> integers_;
  std::deque<std::string> strings_;
};

// ------------------------------------------------------------------------------------------------
// The base class: the MujocoPlugin callbacks and the ControlPlugin hooks.

namespace detail {
template <class T>
struct Shim;
}  // namespace detail

struct PluginContext {
  std::string name;  // the configured plugin name
  std::string type;  // its `package/Class` type
  Config config;     // its configuration
};

class Plugin {
 public:
  explicit Plugin(const PluginContext& context)
      : name_(context.name), type_(context.type), config_(context.config) {}
  virtual ~Plugin() = default;
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const Config& config() const { return config_; }

  // Required, as in MujocoPlugin: bind model-specific resources. False or a throw = load failure.
  virtual bool load(const mjModel* m, mjData* d) = 0;
  virtual bool activate() { return true; }
  // A throw here cannot stop the unload: mjfast prints it to stderr
  // ("mjfast: plugin '<name>' raised in unload(): <what>") and goes on.
  virtual void unload() {}

  // MujocoPlugin callbacks (dispatched only if overridden).
  virtual void control(const mjModel*, mjData*) {}
  virtual void passive(const mjModel*, mjData*) {}  // add to qfrc_passive, don't overwrite
  virtual void render(const mjModel*, mjData*, mjvScene*) {}
  virtual void last_stage(const mjModel*, mjData*) {}
  virtual void geom_changed(const mjModel*, mjData*, int /*geom_id*/) {}
  virtual void reset() {}

  // ControlPlugin hooks (dispatched only if overridden).
  virtual void pre_step(const mjModel*, mjData*) {}
  virtual void update_read(const mjModel*, mjData*) {}
  virtual void update_write(const mjModel*, mjData*) {}
  virtual void on_reset(const mjModel*, mjData*) {}

  // Opens the model's camera `name` with its parameters from the parameter server; only from
  // load() (elsewhere: std::logic_error). An unknown name throws std::runtime_error naming it and
  // listing the model's cameras. Keep the Camera in a member; destroy it (or let the plugin's
  // destruction do it) to close it.
  Camera open_offscreen_camera(const std::string& name) {
    if (host_ == nullptr) {
      throw std::logic_error(
          "open_offscreen_camera(): this mjfast provides no host services "
          "to native plugins");
    }
    mjfast_camera* camera = nullptr;
    mjfast_error error{};
    detail::check_host(host_->open_camera(host_context_, name.c_str(), &camera, &error), error);
    return Camera(host_, camera);
  }

  // Simulation requests (SPEC section 13), from any callback: the env pauses its physics thread,
  // or resets the world (`keyframe` nullptr: the initial state), at its next step boundary; these
  // return at once. std::logic_error when this mjfast has no such service or no env to ask.
  void request_pause() {
    mjfast_error error{};
    detail::check_host(requests_host("request_pause()")->request_pause(host_context_, &error),
                       error);
  }
  void request_reset(const char* keyframe = nullptr) {
    mjfast_error error{};
    detail::check_host(
        requests_host("request_reset()")->request_reset(host_context_, keyframe, &error), error);
  }

  // Publishes `message` on the env's bus as a dict, as the plugin's Python node would: `~scan` is
  // `<env namespace>/<plugin name>/scan`, `/absolute` is global. The GIL is taken for the
  // publication only; subscribers run on the calling thread before this returns. From any
  // callback or a thread of the plugin's own. std::logic_error when this mjfast has no publish
  // service (or gives this instance no bus), std::runtime_error when the publication fails.
  void publish(const std::string& topic, const Message& message) {
    if (host_ == nullptr || !MJFAST_HOST_API_HAS_PUBLISH(host_)) {
      throw std::logic_error("publish(): this mjfast provides no publishing to native plugins");
    }
    mjfast_error error{};
    const std::vector<mjfast_message_field>& fields = message.fields();
    detail::check_host(
        host_->publish(host_context_, topic.c_str(), fields.data(), fields.size(), &error), error);
  }
  // The index of this instance's world in its VectorEnv (SPEC section 21), 0 in a MujocoEnv or
  // from an mjfast without the service; known from load() on (not in the constructor).
  std::int64_t world_index() const {
    if (host_ == nullptr || !MJFAST_HOST_API_HAS_WORLD_INDEX(host_)) return 0;
    return host_->world_index(host_context_);
  }

  // Whether publish() can work here (a host with the publish service).
  bool can_publish() const { return host_ != nullptr && MJFAST_HOST_API_HAS_PUBLISH(host_); }

  // The raw host table and this instance's context for it (nullptr before set_host, or from an
  // mjfast without host services): for a host service the C++ layer does not wrap.
  const mjfast_host_api* host_api() const { return host_; }
  void* host_context() const { return host_context_; }

  // Optional state (SPEC section 20): a plugin whose run depends on internal state (a noise
  // generator, a schedule, an integrator) overrides both (one without the other does not
  // compile). get_state() returns it as bytes of the plugin's own format; set_state() restores
  // such bytes, possibly from another instance with the same configuration: check them first and
  // throw, leaving the plugin as it was, when they are not a state of this plugin. Called at a
  // step boundary with no callback in flight; env.get_state() shows the bytes as Python `bytes`.
  virtual std::string get_state() { return {}; }
  virtual void set_state(const std::string& /*state*/) {}

  // Escape hatch for user code: `with env.acquire_plugin(name) as p: p.call(command, argument)`.
  // Runs with no callback of this env in flight. The default knows no command.
  virtual std::string call(const std::string& command, const std::string& /*argument*/) {
    throw std::runtime_error("plugin '" + name_ + "' (" + type_ + ") has no command '" + command +
                             "'");
  }

 private:
  template <class T>
  friend struct detail::Shim;

  const mjfast_host_api* requests_host(const char* what) const {
    if (host_ == nullptr || !MJFAST_HOST_API_HAS_REQUESTS(host_)) {
      throw std::logic_error(std::string(what) +
                             ": this mjfast provides no simulation requests "
                             "to native plugins");
    }
    return host_;
  }

  std::string name_;
  std::string type_;
  Config config_;
  const mjfast_host_api* host_ = nullptr;  // set before load() by mjfast (set_host)
  void* host_context_ = nullptr;
};

// ------------------------------------------------------------------------------------------------
// The C shim MJFAST_PLUGIN generates: catches every exception at the ABI boundary.

namespace detail {

inline void set_error(mjfast_error* error, const char* message) {
  if (error == nullptr) return;
  std::strncpy(error->message, message, sizeof(error->message) - 1);
  error->message[sizeof(error->message) - 1] = '\0';
}

// `logic_code`: a host that handed the instance its table understands MJFAST_LOGIC_ERROR.
template <class Body>
int guarded(mjfast_error* error, bool logic_code, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::logic_error& e) {
    set_error(error, e.what());
    if (logic_code) return MJFAST_LOGIC_ERROR;
  } catch (const std::exception& e) {
    set_error(error, e.what());
  } catch (...) {
    set_error(error, "unknown C++ exception");
  }
  return MJFAST_ERROR;
}

// Whether T overrides a member: &T::f names Plugin's member unless T (or a base between) declares
// it.
#define MJFAST_DETAIL_OVERRIDES(T, member, bit) \
  (std::is_same_v<decltype(&T::member), decltype(&::mjfast::Plugin::member)> ? 0u : (bit))

template <class T>
constexpr std::uint32_t overridden_callbacks() {
  return MJFAST_DETAIL_OVERRIDES(T, control, MJFAST_CB_CONTROL) |
         MJFAST_DETAIL_OVERRIDES(T, passive, MJFAST_CB_PASSIVE) |
         MJFAST_DETAIL_OVERRIDES(T, render, MJFAST_CB_RENDER) |
         MJFAST_DETAIL_OVERRIDES(T, last_stage, MJFAST_CB_LAST_STAGE) |
         MJFAST_DETAIL_OVERRIDES(T, geom_changed, MJFAST_CB_GEOM_CHANGED) |
         MJFAST_DETAIL_OVERRIDES(T, reset, MJFAST_CB_RESET) |
         MJFAST_DETAIL_OVERRIDES(T, on_reset, MJFAST_CB_RESET) |
         MJFAST_DETAIL_OVERRIDES(T, pre_step, MJFAST_CB_PRE_STEP) |
         MJFAST_DETAIL_OVERRIDES(T, update_read, MJFAST_CB_UPDATE_READ) |
         MJFAST_DETAIL_OVERRIDES(T, update_write, MJFAST_CB_UPDATE_WRITE);
}

template <class T>
struct Shim {
  static T& self(void* instance) { return *static_cast<T*>(instance); }
  static bool logic(void* instance) { return self(instance).host_ != nullptr; }

  static void* create(const char* name, const char* type, const char* config_json,
                      mjfast_error* error) noexcept {
    try {
      PluginContext context{name, type, Config::parse(config_json ? config_json : "{}")};
      return new T(context);
    } catch (const std::exception& e) {
      set_error(error, e.what());
    } catch (...) {
      set_error(error, "unknown C++ exception");
    }
    return nullptr;
  }
  static void destroy(void* instance) noexcept { delete static_cast<T*>(instance); }
  static int load(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] { return self(i).load(m, d) ? MJFAST_OK : MJFAST_FALSE; });
  }
  static int activate(void* i, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] { return self(i).activate() ? MJFAST_OK : MJFAST_FALSE; });
  }
  static int unload(void* i, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).unload();
      return MJFAST_OK;
    });
  }
  static int control(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).control(m, d);
      return MJFAST_OK;
    });
  }
  static int passive(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).passive(m, d);
      return MJFAST_OK;
    });
  }
  static int render(void* i, const mjModel* m, mjData* d, mjvScene* s, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).render(m, d, s);
      return MJFAST_OK;
    });
  }
  static int last_stage(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).last_stage(m, d);
      return MJFAST_OK;
    });
  }
  static int geom_changed(void* i, const mjModel* m, mjData* d, int g, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).geom_changed(m, d, g);
      return MJFAST_OK;
    });
  }
  static int reset(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).reset();
      self(i).on_reset(m, d);
      return MJFAST_OK;
    });
  }
  static int pre_step(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).pre_step(m, d);
      return MJFAST_OK;
    });
  }
  static int update_read(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).update_read(m, d);
      return MJFAST_OK;
    });
  }
  static int update_write(void* i, const mjModel* m, mjData* d, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).update_write(m, d);
      return MJFAST_OK;
    });
  }
  static int call(void* i, const char* command, const char* argument, mjfast_string_sink sink,
                  void* context, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      const std::string reply = self(i).call(command ? command : "", argument ? argument : "");
      sink(context, reply.data(), reply.size());
      return MJFAST_OK;
    });
  }

  static int get_state(void* i, mjfast_string_sink sink, void* context, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      const std::string state = self(i).get_state();
      sink(context, state.data(), state.size());
      return MJFAST_OK;
    });
  }
  static int set_state(void* i, const char* data, size_t size, mjfast_error* e) noexcept {
    return guarded(e, logic(i), [&] {
      self(i).set_state(std::string(data, size));
      return MJFAST_OK;
    });
  }

  static void set_host(void* i, const mjfast_host_api* host, void* context) noexcept {
    // Older host tables lack later fields: the camera services are the least this header uses;
    // the simulation requests check for themselves.
    if (host == nullptr || host->struct_size < MJFAST_HOST_API_CAMERAS_SIZE) return;
    self(i).host_ = host;
    self(i).host_context_ = context;
  }

  static constexpr bool kGetsState =
      !std::is_same_v<decltype(&T::get_state), decltype(&::mjfast::Plugin::get_state)>;
  static constexpr bool kSetsState =
      !std::is_same_v<decltype(&T::set_state), decltype(&::mjfast::Plugin::set_state)>;
  static_assert(kGetsState == kSetsState,
                "a mjfast::Plugin with state overrides both get_state() and set_state()");

  static const mjfast_plugin_api* api(const char* class_name) {
    static const mjfast_plugin_api table = {MJFAST_PLUGIN_ABI_VERSION,
                                            sizeof(mjfast_plugin_api),
                                            class_name,
                                            overridden_callbacks<T>(),
                                            &create,
                                            &destroy,
                                            &load,
                                            &activate,
                                            &unload,
                                            &control,
                                            &passive,
                                            &render,
                                            &last_stage,
                                            &geom_changed,
                                            &reset,
                                            &pre_step,
                                            &update_read,
                                            &update_write,
                                            &call,
                                            &set_host,
                                            kGetsState ? &get_state : nullptr,
                                            kSetsState ? &set_state : nullptr};
    return &table;
  }
};

}  // namespace detail
}  // namespace mjfast

// Exports the entry function `mjfast_plugin_<Class>` for a mjfast::Plugin subclass; name it in
// the descriptor: mjfast.NativePlugin(library="lib....so", class_name="<Class>").
#define MJFAST_PLUGIN(Class)                                                  \
  static_assert(std::is_base_of_v<::mjfast::Plugin, Class>,                   \
                #Class " must derive from mjfast::Plugin");                   \
  MJFAST_PLUGIN_EXPORT const mjfast_plugin_api* mjfast_plugin_##Class(void) { \
    return ::mjfast::detail::Shim<Class>::api(#Class);                        \
  }
