// mjfast/Lidar: a 2-D or 3-D lidar cast with MuJoCo's mj_multiRay, sync or async (SPEC §14).
//
// Configuration keys (their names, nested ones and the site or body name included, are declared
// in mjfast/plugins/native.py and checked by mjfast before create, with mjfast.names' messages;
// their values are validated in load(), a failure naming the key and what was expected):
// - `site` or `body` (exactly one is required): the rays start at this site, in its frame (x
//   forward, z up), or at body `body`'s frame moved by `pos` (metres, default 0 0 0) and turned by
//   `quat` (w x y z, default 1 0 0 0), both in the body frame: for models whose sensor mount has
//   no site. Geoms of the site's (or that) body are not seen (none are excluded on the world body);
//   `~points` names the site or the body as its `frame`.
// - `horizontal: {samples, min_angle, max_angle}`: azimuth, radians, counter-clockwise about +z;
//   default 360 samples over the full turn starting at -pi (`max_angle` defaults to one increment
//   short of `min_angle + 2 pi`).
// - `vertical: {samples, min_angle, max_angle}`: elevation, radians, positive upward; default one
//   ring at elevation 0 (a 2-D scan). Both ends are sampled, spaced `(max - min) / (samples - 1)`.
//   horizontal.samples x vertical.samples may be at most kMaxRays (4,194,304 rays: 16 times a
//   128-beam, 2048-column spinning lidar; about 0.4 GB of buffers, twice that in async mode).
//   The count is checked in 64 bits before anything is allocated, so a larger one is a load
//   failure naming both sample counts and the ray count.
// - `range: {min, max}` (required, metres), `rate_hz` (simulated time, default 10),
//   `geom_groups` (the geom groups the rays see, default all), `noise_std` (metres of Gaussian
//   noise on each return, default 0) and `seed` (default 0; env.reset() restarts the generator),
//   `async` (default false), `visualize` (default false), `topic` (default `~scan` for one ring,
//   `~points` for more; absolute or relative to the plugin's node).
//
// One ring publishes `~scan` {time, angle_min, angle_max, angle_increment, range_min, range_max,
// ranges} (float32, +inf for no return within max, -inf for a return closer than min); more rings
// publish `~points` {time, frame, points} (float32 V x H x 3 in the lidar frame, rows by rising
// elevation, columns by rising azimuth, NaN for no return within range).
// It declares that topic after load (topics(), SPEC §19): a `laser_scan` as sensor_msgs/LaserScan
// (its scan_time the period) or a `point_cloud` as sensor_msgs/PointCloud2, framed by its mount.
//
// How it is fast: the per-step test of a scan that is not due is one comparison of d->time
// against the window [previous due time, next due time) in last_stage. The ray directions are
// computed once in the site frame at load and rotated by the site's orientation per scan, then
// cast by one mj_multiRay call. Sync mode casts in last_stage on the physics thread. Async mode
// copies, at a due step, the poses mj_multiRay reads (geom, body and inertial frames; the whole
// mjData when the model has flexes) into the worker's own mjData, and a worker thread
// ("mjfast-lidar") casts and builds the message buffers there; the physics thread publishes that
// result at the next due step, one period late and stamped with the snapshot's time. Poses are
// copied rather than recomputed by mj_kinematics from a copy of qpos: in last_stage the frames
// belong to the state before the step's integration (the state the sync cast sees), while qpos
// is already the next state; and the copy is a few kB. If the worker has not finished by the next
// due step, the physics thread waits for it, so that results stay deterministic; the waits are in
// the statistics (`worker_waits`, `worker_wait_s`).
//
// Noise: std::mt19937_64 seeded by `seed` with std::normal_distribution, one draw per ray every
// scan (misses included, so the sequence does not depend on the scene); reset by env.reset().
// The values differ from the Python plugin's numpy Generator; reproducibility and spread do not.
//
// State (env.get_state/set_state, SPEC §20): the schedule's window, the noise generator and
// distribution (their standard text form), and in async mode the scan in flight (waited for, then
// kept: its result is what the next due step publishes), plus the visualised scan; bytes in the
// plugin's own format (native byte order), checked whole before anything is set.
//
// `visualize: true` draws the latest published scan's returns as line geoms from the site in
// render, as many as the scene has room for; the rest are counted (`visual_geoms_dropped`).
// Statistics (acquire_plugin(...).statistics() or call("statistics")): rays, scans,
// worker_waits, worker_wait_s, visual_geoms_dropped.
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <locale>
#include <memory>
#include <mjfast/plugin.hpp>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace mjfast_plugins {
namespace {

using mjfast::Config;

constexpr double kPi = 3.14159265358979323846;
// The most rays one lidar casts per scan (see the header). Real lidars cast far fewer; the bound
// keeps every buffer size and MuJoCo's `int` ray count far from overflow.
constexpr std::int64_t kMaxRays = std::int64_t{1} << 22;
constexpr float kRayRgba[4] = {1.0f, 0.1f, 0.1f, 0.8f};
constexpr double kRayWidth = 2.0;  // pixels, for mjGEOM_LINE
// How long the worker spins for its next job after a cast before sleeping: when the physics thread
// was waiting for that cast, the next job comes a few microseconds later, and taking it without a
// wake-up syscall saved the stepping thread ~60 us of CPU per scan on the humanoid benchmark (a
// condition-variable wake-up on the development VM). The physics thread never spins: its wait is
// typically the rest of a cast (milliseconds), where a spin would be all cost.
constexpr std::chrono::microseconds kWorkerSpin{200};

// -- messages that read like the Python plugin's (Python's repr of the configured values) --------

// repr(float): the shortest text that reads back as the same double, with ".0" when integral.
std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof(text), "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string result = text;
  if (result.find_first_of(".en") == std::string::npos) result += ".0";
  return result;
}

std::string string_repr(const std::string& text) {
  const bool double_quotes =
      text.find('\'') != std::string::npos && text.find('"') == std::string::npos;
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out + quote;
}

std::string repr(const Config& value) {
  switch (value.kind()) {
    case Config::Kind::kNull: return "None";
    case Config::Kind::kBool: return value.as_bool() ? "True" : "False";
    case Config::Kind::kNumber:
      if (value.is_integer_literal() && std::fabs(value.as_number()) < 1e18) {
        return std::to_string(static_cast<long long>(value.as_number()));
      }
      return float_repr(value.as_number());
    case Config::Kind::kString: return string_repr(value.as_string());
    case Config::Kind::kList: {
      std::string out = "[";
      for (std::size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + repr(value[i]);
      return out + "]";
    }
    case Config::Kind::kMapping: {
      std::string out = "{";
      bool first = true;
      for (const std::string& key : value.keys()) {
        out += (first ? "" : ", ") + string_repr(key) + ": " + repr(value.at(key));
        first = false;
      }
      return out + "}";
    }
  }
  return "?";
}

// Python's `f"{x:g}"`.
std::string g_format(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

// -- configuration checks (mjfast/plugins/_sensing.py's, message for message) ---------------------

class Checker {
 public:
  explicit Checker(std::string plugin) : plugin_(std::move(plugin)) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(plugin_ + ": " + what);
  }

  // `value` nullptr: the default. minimum: NaN for none.
  double number(const std::string& key, const Config* value, double fallback,
                double minimum = std::nan(""), bool strict = false) const {
    if (value == nullptr) return check_bound(key, fallback, float_repr(fallback), minimum, strict);
    if (!value->is_number()) fail(key + " must be a number, got " + repr(*value));
    const double result = value->as_number();
    if (!std::isfinite(result)) fail(key + " must be a finite number, got " + repr(*value));
    return check_bound(key, result, repr(*value), minimum, strict);
  }

  int positive_int(const std::string& key, const Config* value, int fallback) const {
    if (value == nullptr) return fallback;
    if (!value->is_integer_literal() || value->as_number() < 1 ||
        value->as_number() > std::numeric_limits<int>::max()) {
      fail(key + " must be a positive integer, got " + repr(*value));
    }
    return static_cast<int>(value->as_number());
  }

  std::uint64_t seed(const Config* value) const {
    if (value == nullptr) return 0;
    if (!value->is_integer_literal() || value->as_number() < 0 ||
        value->as_number() >= 18446744073709551616.0) {
      fail("seed must be a non-negative integer, got " + repr(*value));
    }
    return static_cast<std::uint64_t>(value->as_number());
  }

 private:
  double check_bound(const std::string& key, double value, const std::string& text, double minimum,
                     bool strict) const {
    if (!std::isnan(minimum) && (strict ? value <= minimum : value < minimum)) {
      fail(key + " must be " + (strict ? ">" : ">=") + " " + g_format(minimum) + ", got " + text);
    }
    return value;
  }

  std::string plugin_;
};

const Config* get(const Config& mapping, const std::string& key) {
  return mapping.has(key) ? &mapping.at(key) : nullptr;
}

// One axis's spec (an empty mapping when not given), its shape and keys checked.
const Config& axis_spec(const Checker& check, const std::string& key, const Config* spec) {
  static const Config empty = Config::parse("{}");
  if (spec == nullptr || spec->is_null()) return empty;
  if (!spec->is_mapping()) {
    check.fail(key + " must be a mapping {samples, min_angle, max_angle}, got " + repr(*spec));
  }
  return *spec;
}

int axis_samples(const Checker& check, const std::string& key, const Config& spec,
                 int default_samples) {
  return check.positive_int(key + ".samples", get(spec, "samples"), default_samples);
}

// The sampled angles of one axis, rising (horizontal: full_turn); `samples` already bounded.
std::vector<double> angles(const Checker& check, const std::string& key, const Config& config,
                           int samples, bool full_turn) {
  const Config* spec = &config;
  double low = 0.0;
  double high_default = 0.0;
  if (full_turn) {
    low = check.number(key + ".min_angle", get(*spec, "min_angle"), -kPi);
    high_default = low + 2 * kPi * (samples - 1) / samples;
  } else {
    if (samples > 1 && !(spec->has("min_angle") && spec->has("max_angle"))) {
      check.fail(key + " with " + std::to_string(samples) + " samples needs min_angle and " +
                 "max_angle");
    }
    low = check.number(key + ".min_angle", get(*spec, "min_angle"), 0.0);
    high_default = low;
  }
  const double high = check.number(key + ".max_angle", get(*spec, "max_angle"), high_default);
  if (high < low) {
    check.fail(key + ".max_angle must be >= " + key + ".min_angle, got " + float_repr(high) +
               " < " + float_repr(low));
  }
  if (samples == 1 && high != low) {
    check.fail(key + " with one sample needs min_angle == max_angle, got " + float_repr(low) +
               " and " + float_repr(high));
  }
  if (!full_turn && (low < -kPi / 2 || high > kPi / 2)) {
    check.fail(key + " angles must lie in [-pi/2, pi/2], got [" + float_repr(low) + ", " +
               float_repr(high) + "]");
  }
  // numpy.linspace: start + i * step, the last one exactly `high`.
  std::vector<double> result(static_cast<std::size_t>(samples), low);
  if (samples > 1) {
    const double step = (high - low) / (samples - 1);
    for (int i = 0; i < samples; ++i) result[i] = low + i * step;
    result.back() = high;
  }
  return result;
}

// Due times at whole multiples of the period in simulated time (mjfast/plugins/_sensing.py's
// RateSchedule): not due iff low <= t < high; a time below the window (a reset) is due.
struct Window {
  double low;
  double high;
};

// The plugin's state bytes: values appended in order, read back in the same order, every length
// checked against what is left.
class StateWriter {
 public:
  template <class T>
  void pod(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    data.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  template <class T>
  void values(const T* items, std::size_t count) {
    pod(static_cast<std::uint64_t>(count));
    data.append(reinterpret_cast<const char*>(items), count * sizeof(T));
  }
  void text(const std::string& value) { values(value.data(), value.size()); }
  std::string data;
};

class StateReader {
 public:
  explicit StateReader(const std::string& data) : data_(data) {}
  template <class T>
  T pod() {
    T value;
    std::memcpy(&value, take(sizeof(T)), sizeof(T));
    return value;
  }
  template <class T>
  std::vector<T> values() {
    const auto count = pod<std::uint64_t>();
    if (count > (data_.size() - pos_) / sizeof(T)) fail("a list longer than the bytes left");
    std::vector<T> items(static_cast<std::size_t>(count));
    if (count > 0)
      std::memcpy(items.data(), take(items.size() * sizeof(T)), items.size() * sizeof(T));
    return items;
  }
  std::string text() {
    const std::vector<char> chars = values<char>();
    return std::string(chars.begin(), chars.end());
  }
  void end() const {
    if (pos_ != data_.size()) fail("bytes left over after the end");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("set_state: not a state of this Lidar: " + what + " (at byte " +
                             std::to_string(pos_) + " of " + std::to_string(data_.size()) + ")");
  }

 private:
  const char* take(std::size_t size) {
    if (size > data_.size() - pos_) fail("it ends early");
    const char* at = data_.data() + pos_;
    pos_ += size;
    return at;
  }
  const std::string& data_;
  std::size_t pos_ = 0;
};

// A standard random engine's or distribution's state as its standard text form, and back.
template <class T>
std::string stream_text(const T& value) {
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << value;
  return out.str();
}

template <class T>
T from_stream_text(const std::string& text, const StateReader& reader) {
  std::istringstream in(text);
  in.imbue(std::locale::classic());
  T value;
  in >> value;
  if (in.fail()) reader.fail("a generator's state does not read back");
  return value;
}

constexpr char kStateMagic[] = "mjfast/Lidar state 1";

// One cast's buffers; the message arrays are rebuilt in place each scan.
struct Scan {
  explicit Scan(std::size_t rays)
      : vec(rays * 3), dist(rays), ranges(rays), geomid(rays), out(rays * 3) {}
  std::vector<mjtNum> vec;
  std::vector<mjtNum> dist;
  std::vector<double> ranges;
  std::vector<int> geomid;
  std::vector<float> out;    // ranges (one ring) or points (V x H x 3)
  std::vector<mjtNum> hits;  // world hit points of the finite returns (visualize)
  mjtNum origin[3] = {0, 0, 0};
  mjtNum rotation[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  double time = 0.0;
};

class Lidar final : public mjfast::Plugin {
 public:
  using Plugin::Plugin;
  ~Lidar() override { stop_worker(); }

  bool load(const mjModel* m, mjData* d) override {
    const Checker check(name());
    const Config& config = this->config();
    mount(check, m, config);
    if (const Config* topic = get(config, "topic"); topic != nullptr && !topic->is_null()) {
      if (!topic->is_string() || topic->as_string().find_first_not_of("/~") == std::string::npos) {
        check.fail("topic must be a non-empty topic name, got " + repr(*topic));
      }
      topic_ = topic->as_string();
    }
    // Both sample counts, and their product in 64 bits, are bounded before anything is allocated.
    const Config& horizontal = axis_spec(check, "horizontal", get(config, "horizontal"));
    const Config& vertical = axis_spec(check, "vertical", get(config, "vertical"));
    const int columns = axis_samples(check, "horizontal", horizontal, 360);
    const int rows = axis_samples(check, "vertical", vertical, 1);
    const std::int64_t rays = std::int64_t{columns} * std::int64_t{rows};
    if (rays > kMaxRays) {
      check.fail("horizontal.samples " + std::to_string(columns) + " x vertical.samples " +
                 std::to_string(rows) + " = " + std::to_string(rays) +
                 " rays: a lidar casts at most " + std::to_string(kMaxRays) + " rays per scan");
    }
    const std::vector<double> azimuth = angles(check, "horizontal", horizontal, columns, true);
    const std::vector<double> elevation = angles(check, "vertical", vertical, rows, false);
    const Config* range = get(config, "range");
    if (range == nullptr || !range->is_mapping() || !range->has("max")) {
      check.fail("range is required: a mapping {min, max} in metres, got " +
                 (range == nullptr ? std::string("None") : repr(*range)));
    }
    range_min_ = check.number("range.min", get(*range, "min"), 0.0, 0.0);
    range_max_ = check.number("range.max", get(*range, "max"), 0.0, range_min_, true);
    const double rate_hz = check.number("rate_hz", get(config, "rate_hz"), 10.0, 0.0, true);
    noise_std_ = check.number("noise_std", get(config, "noise_std"), 0.0, 0.0);
    seed_ = check.seed(get(config, "seed"));
    if (const Config* groups = get(config, "geom_groups");
        groups != nullptr && !groups->is_null()) {
      bool ok = groups->is_list();
      std::vector<mjtByte> mask(mjNGROUP, 0);
      for (std::size_t i = 0; ok && i < groups->size(); ++i) {
        const Config& group = (*groups)[i];
        ok = group.is_integer_literal() && group.as_number() >= 0 && group.as_number() < mjNGROUP;
        if (ok) mask[static_cast<int>(group.as_number())] = 1;
      }
      if (!ok) {
        check.fail("geom_groups must be a list of geom groups in 0.." +
                   std::to_string(mjNGROUP - 1) + ", got " + repr(*groups));
      }
      geomgroup_ = mask;
    }
    for (const char* key : {"async", "visualize"}) {
      const Config* flag = get(config, key);
      if (flag != nullptr && !flag->is_bool()) {
        check.fail(std::string(key) + " must be true or false, got " + repr(*flag));
      }
      (std::strcmp(key, "async") == 0 ? async_ : visualize_) = flag != nullptr && flag->as_bool();
    }
    if (!can_publish()) {
      throw std::runtime_error(name() + ": this mjfast gives native plugins no publish service");
    }

    // Directions in the lidar frame, rows by rising elevation, columns by rising azimuth.
    rows_ = static_cast<int>(elevation.size());
    columns_ = static_cast<int>(azimuth.size());
    rays_ = rows_ * columns_;
    directions_.resize(static_cast<std::size_t>(rays_) * 3);
    for (int r = 0; r < rows_; ++r) {
      for (int c = 0; c < columns_; ++c) {
        double* direction = &directions_[(static_cast<std::size_t>(r) * columns_ + c) * 3];
        direction[0] = std::cos(elevation[r]) * std::cos(azimuth[c]);
        direction[1] = std::cos(elevation[r]) * std::sin(azimuth[c]);
        direction[2] = std::sin(elevation[r]);
      }
    }
    one_ring_ = rows_ == 1;
    angle_min_ = azimuth.front();
    angle_max_ = azimuth.back();
    angle_increment_ = azimuth.size() > 1 ? azimuth[1] - azimuth[0] : 0.0;
    period_ = 1.0 / rate_hz;
    half_step_ = 0.5 * m->opt.timestep;
    restart(d->time);
    reseed();
    scan_ = std::make_unique<Scan>(static_cast<std::size_t>(rays_));
    if (async_) start_worker(m);
    return true;
  }

  void last_stage(const mjModel* m, mjData* d) override {
    const double time = d->time;
    if (time >= window_.low && time < window_.high) return;  // not due: the per-step cost
    restart(time);
    if (!async_) {
      Scan& scan = *scan_;
      pose(d, scan);
      scan.time = time;
      cast(m, d, scan);
      finish(scan);
      send(scan);
      return;
    }
    if (pending_) {
      collect();
      if (job_ok_) send(*worker_scan_);
    }
    snapshot(m, d, time);
  }

  void render(const mjModel*, mjData*, mjvScene* scene) override {
    if (!has_visual_) return;
    const std::size_t hits = visual_hits_.size() / 3;
    const std::size_t room = static_cast<std::size_t>(std::max(0, scene->maxgeom - scene->ngeom));
    const std::size_t count = std::min(room, hits);
    dropped_ += hits - count;
    const mjtNum zeros[3] = {0, 0, 0};
    const mjtNum eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    for (std::size_t i = 0; i < count; ++i) {
      mjvGeom* geom = scene->geoms + scene->ngeom + i;
      mjv_initGeom(geom, mjGEOM_LINE, zeros, zeros, eye, kRayRgba);
      mjv_connector(geom, mjGEOM_LINE, kRayWidth, visual_origin_, &visual_hits_[i * 3]);
    }
    scene->ngeom += static_cast<int>(count);
  }

  void on_reset(const mjModel*, mjData* d) override {
    drain();
    reseed();
    has_visual_ = false;
    restart(d->time);
  }

  void unload() override { stop_worker(); }

  std::string get_state() override {
    if (async_ && pending_) wait_for_cast();  // its result and its noise draws are state
    StateWriter out;
    out.text(kStateMagic);
    out.pod(static_cast<std::int64_t>(rays_));
    out.pod(static_cast<std::uint8_t>(async_));
    out.pod(window_.low);
    out.pod(window_.high);
    out.text(stream_text(generator_));
    out.text(stream_text(normal_));
    out.pod(static_cast<std::uint8_t>(async_ && pending_));
    if (async_ && pending_) {
      const Scan& scan = *worker_scan_;
      out.pod(static_cast<std::uint8_t>(job_ok_));
      out.pod(scan.time);
      out.values(scan.origin, 3);
      out.values(scan.out.data(), scan.out.size());
      out.values(scan.hits.data(), scan.hits.size());
    }
    out.pod(static_cast<std::uint8_t>(has_visual_));
    out.values(visual_origin_, 3);
    out.values(visual_hits_.data(), visual_hits_.size());
    return out.data;
  }

  void set_state(const std::string& state) override {
    StateReader in(state);
    if (in.text() != kStateMagic)
      in.fail("it does not start with '" + std::string(kStateMagic) + "'");
    const auto rays = in.pod<std::int64_t>();
    const bool async = in.pod<std::uint8_t>() != 0;
    if (rays != rays_ || async != async_) {
      in.fail("it is of a lidar with " + std::to_string(rays) + " rays, async " +
              (async ? "true" : "false") + "; this one has " + std::to_string(rays_) +
              " rays, async " + (async_ ? "true" : "false"));
    }
    const Window window{in.pod<double>(), in.pod<double>()};
    const auto generator = from_stream_text<std::mt19937_64>(in.text(), in);
    const auto normal = from_stream_text<std::normal_distribution<double>>(in.text(), in);
    const bool pending = in.pod<std::uint8_t>() != 0;
    bool job_ok = false;
    double time = 0.0;
    std::vector<mjtNum> origin, hits;
    std::vector<float> out;
    if (pending) {
      job_ok = in.pod<std::uint8_t>() != 0;
      time = in.pod<double>();
      origin = in.values<mjtNum>();
      out = in.values<float>();
      hits = in.values<mjtNum>();
      if (!async_ || origin.size() != 3 || out.size() != worker_scan_->out.size() ||
          hits.size() % 3 != 0) {
        in.fail("its scan in flight does not fit this lidar");
      }
    }
    const bool has_visual = in.pod<std::uint8_t>() != 0;
    const std::vector<mjtNum> visual_origin = in.values<mjtNum>();
    std::vector<mjtNum> visual_hits = in.values<mjtNum>();
    if (visual_origin.size() != 3 || visual_hits.size() % 3 != 0) in.fail("a bad visualised scan");
    in.end();
    drain();  // a cast in flight finishes before its buffers are replaced
    window_ = window;
    generator_ = generator;
    normal_ = normal;
    if (pending) {
      Scan& scan = *worker_scan_;
      scan.time = time;
      std::copy(origin.begin(), origin.end(), scan.origin);
      scan.out = std::move(out);
      scan.hits = std::move(hits);
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ok_ = job_ok;
      }
    }
    pending_ = pending;
    has_visual_ = has_visual;
    std::copy(visual_origin.begin(), visual_origin.end(), visual_origin_);
    visual_hits_ = std::move(visual_hits);
  }

  std::string call(const std::string& command, const std::string& argument) override {
    if (command == "statistics") {
      char text[256];
      std::snprintf(text, sizeof(text),
                    "{\"rays\": %d, \"scans\": %llu, \"worker_waits\": %llu, "
                    "\"worker_wait_s\": %.17g, \"visual_geoms_dropped\": %llu}",
                    rays_, static_cast<unsigned long long>(scans_),
                    static_cast<unsigned long long>(waits_), wait_s_,
                    static_cast<unsigned long long>(dropped_));
      return text;
    }
    return Plugin::call(command, argument);
  }

  // One ring: a LaserScan; more: a PointCloud2; stamped with the mount's frame (SPEC §19).
  std::vector<mjfast::Topic> topics() const override {
    mjfast::Topic topic;
    if (one_ring_) {
      topic.topic = topic_.empty() ? "~scan" : topic_;
      topic.kind = "laser_scan";
      topic.ros_type = "sensor_msgs/msg/LaserScan";
      topic.params["scan_time"] = period_;
    } else {
      topic.topic = topic_.empty() ? "~points" : topic_;
      topic.kind = "point_cloud";
      topic.ros_type = "sensor_msgs/msg/PointCloud2";
    }
    topic.frame_type = site_ >= 0 ? "site" : "body";
    topic.frame_name = frame_;
    return {topic};
  }

 private:
  void restart(double time) {
    const double index = std::floor((time + half_step_) / period_);
    window_ = {index * period_ - half_step_, (index + 1) * period_ - half_step_};
  }

  void reseed() {
    generator_.seed(seed_);
    normal_ = std::normal_distribution<double>(0.0, noise_std_ > 0 ? noise_std_ : 1.0);
  }

  void pose(const mjData* d, Scan& scan) const {
    if (site_ >= 0) {
      std::memcpy(scan.origin, d->site_xpos + 3 * site_, sizeof(scan.origin));
      std::memcpy(scan.rotation, d->site_xmat + 9 * site_, sizeof(scan.rotation));
      return;
    }
    // The body's frame moved by the offset, which is in that frame.
    const mjtNum* xmat = d->xmat + 9 * body_;
    mju_mulMatVec3(scan.origin, xmat, offset_pos_);
    mju_addTo3(scan.origin, d->xpos + 3 * body_);
    mju_mulMatMat(scan.rotation, xmat, offset_rotation_, 3, 3, 3);
  }

  // Where the rays start: `site`, or `body` with an optional `pos`/`quat` offset.
  void mount(const Checker& check, const mjModel* m, const Config& config) {
    const bool has_site = config.has("site");
    const bool has_body = config.has("body");
    if (has_site == has_body) {
      check.fail(has_site ? "site and body are exclusive: give the one the rays start at"
                          : "site (or body) is required: the name of the site (or body) the "
                            "rays start at");
    }
    if (has_site) {
      for (const char* key : {"pos", "quat"}) {
        if (config.has(key)) {
          check.fail(std::string(key) +
                     " offsets a body's frame; a site has its own: give body "
                     "instead of site, or move the site in the model");
        }
      }
    }
    const mjtObj type = has_site ? mjOBJ_SITE : mjOBJ_BODY;
    const char* kind = has_site ? "site" : "body";
    const Config& wanted = config.at(kind);
    const int id = wanted.is_string() ? mj_name2id(m, type, wanted.as_string().c_str()) : -1;
    if (id < 0) {  // mjfast checked the name before create (ModelName): another host's config
      check.fail("the model has no " + std::string(kind) + " named " + repr(wanted));
    }
    frame_ = wanted.as_string();
    if (has_site) {
      site_ = id;
      body_ = m->site_bodyid[id];
    } else {
      site_ = -1;
      body_ = id;
      offset(check, config);
    }
    exclude_ = body_ > 0 ? body_ : -1;
  }

  void offset(const Checker& check, const Config& config) {
    const auto finite_numbers = [&](const char* key, std::size_t size, const char* what) {
      std::vector<double> values;
      const Config* value = get(config, key);
      if (value == nullptr) return values;
      bool ok = value->is_list() && value->size() == size;
      for (std::size_t i = 0; ok && i < size; ++i) {
        ok = (*value)[i].is_number() && std::isfinite((*value)[i].as_number());
        if (ok) values.push_back((*value)[i].as_number());
      }
      if (!ok) {
        check.fail(std::string(key) + " must be a list of " + std::to_string(size) +
                   " finite numbers (" + what + "), got " + repr(*value));
      }
      return values;
    };
    const std::vector<double> pos = finite_numbers("pos", 3, "metres in the body frame");
    if (!pos.empty()) std::copy(pos.begin(), pos.end(), offset_pos_);
    std::vector<double> quat = finite_numbers("quat", 4, "w x y z in the body frame");
    if (quat.empty()) return;
    const double norm =
        std::sqrt(quat[0] * quat[0] + quat[1] * quat[1] + quat[2] * quat[2] + quat[3] * quat[3]);
    if (!(norm > 0) || !std::isfinite(norm)) {
      check.fail("quat must have a non-zero finite norm, got " + repr(config.at("quat")));
    }
    mjtNum unit[4];
    for (int i = 0; i < 4; ++i) unit[i] = quat[static_cast<std::size_t>(i)] / norm;
    mju_quat2Mat(offset_rotation_, unit);
  }

  // World directions (R d for each site-frame d), then one mj_multiRay.
  void cast(const mjModel* m, mjData* d, Scan& scan) const {
    const mjtNum* r = scan.rotation;
    for (int i = 0; i < rays_; ++i) {
      const double* u = &directions_[static_cast<std::size_t>(i) * 3];
      mjtNum* v = &scan.vec[static_cast<std::size_t>(i) * 3];
      v[0] = r[0] * u[0] + r[1] * u[1] + r[2] * u[2];
      v[1] = r[3] * u[0] + r[4] * u[1] + r[5] * u[2];
      v[2] = r[6] * u[0] + r[7] * u[1] + r[8] * u[2];
    }
    mj_multiRay(m, d, scan.origin, scan.vec.data(),
                geomgroup_.empty() ? nullptr : geomgroup_.data(), 1, exclude_, scan.geomid.data(),
                scan.dist.data(), nullptr, rays_, range_max_);
  }

  // The message buffers of a cast (in async mode on the worker, whose generator draws are in scan
  // order: one scan at a time).
  void finish(Scan& scan) {
    constexpr double inf = std::numeric_limits<double>::infinity();
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int i = 0; i < rays_; ++i) {
      // A miss is dist -1 (geomid -1): +inf before the noise (inf + noise stays inf); every ray
      // draws, so that the sequence does not depend on the scene.
      double range = scan.geomid[i] < 0 ? inf : scan.dist[i];
      if (noise_std_ > 0) range += normal_(generator_);
      if (one_ring_) {
        if (range > range_max_)
          range = inf;
        else if (range < range_min_)
          range = -inf;
        scan.out[i] = static_cast<float>(range);
      } else {
        if (range < range_min_ || range > range_max_) range = nan;
        const double* u = &directions_[static_cast<std::size_t>(i) * 3];
        for (int axis = 0; axis < 3; ++axis) {
          scan.out[static_cast<std::size_t>(i) * 3 + axis] = static_cast<float>(u[axis] * range);
        }
      }
      scan.ranges[i] = range;
    }
    if (!visualize_) return;
    scan.hits.clear();
    for (int i = 0; i < rays_; ++i) {
      const double range = scan.ranges[i];
      if (!std::isfinite(range)) continue;
      for (int axis = 0; axis < 3; ++axis) {
        scan.hits.push_back(scan.origin[axis] +
                            scan.vec[static_cast<std::size_t>(i) * 3 + axis] * range);
      }
    }
  }

  void send(const Scan& scan) {
    ++scans_;
    mjfast::Message message;
    message.scalar("time", scan.time);
    if (one_ring_) {
      message.scalar("angle_min", angle_min_)
          .scalar("angle_max", angle_max_)
          .scalar("angle_increment", angle_increment_)
          .scalar("range_min", range_min_)
          .scalar("range_max", range_max_)
          .array("ranges", scan.out.data(), {rays_});
      publish(topic_.empty() ? "~scan" : topic_, message);
    } else {
      message.string("frame", frame_).array("points", scan.out.data(), {rows_, columns_, 3});
      publish(topic_.empty() ? "~points" : topic_, message);
    }
    if (visualize_) {
      std::memcpy(visual_origin_, scan.origin, sizeof(visual_origin_));
      visual_hits_ = scan.hits;
      has_visual_ = true;
    }
  }

  // -- async: a worker with its own mjData
  // ---------------------------------------------------------

  void start_worker(const mjModel* m) {
    worker_model_ = m;
    worker_data_ = mj_makeData(m);
    if (worker_data_ == nullptr) throw std::runtime_error(name() + ": mj_makeData failed");
    worker_scan_ = std::make_unique<Scan>(static_cast<std::size_t>(rays_));
    stop_.store(false);
    worker_ = std::thread([this] { work(); });
  }

  void snapshot(const mjModel* m, const mjData* d, double time) {
    // What mj_multiRay reads of mjData: the geoms' frames (and, for flexes, the vertices); the
    // bodies' frames too, cheaply, in case a MuJoCo version prunes by body.
    if (m->nflex > 0) {
      mj_copyData(worker_data_, m, d);
    } else {
      std::memcpy(worker_data_->geom_xpos, d->geom_xpos, sizeof(mjtNum) * 3 * m->ngeom);
      std::memcpy(worker_data_->geom_xmat, d->geom_xmat, sizeof(mjtNum) * 9 * m->ngeom);
      std::memcpy(worker_data_->xpos, d->xpos, sizeof(mjtNum) * 3 * m->nbody);
      std::memcpy(worker_data_->xmat, d->xmat, sizeof(mjtNum) * 9 * m->nbody);
      std::memcpy(worker_data_->xipos, d->xipos, sizeof(mjtNum) * 3 * m->nbody);
      std::memcpy(worker_data_->ximat, d->ximat, sizeof(mjtNum) * 9 * m->nbody);
    }
    Scan& scan = *worker_scan_;
    pose(d, scan);
    scan.time = time;
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_.store(true, std::memory_order_release);
      wake = worker_sleeping_;
    }
    pending_ = true;
    // A worker still spinning after its last cast takes the job without a wake-up syscall.
    if (wake) wake_.notify_one();
  }

  // Waits for the cast in flight (if it is not done yet) and takes it.
  void collect() {
    wait_for_cast();
    pending_ = false;
  }

  // Waits for the cast in flight, if it is not done yet.
  void wait_for_cast() {
    if (job_.load(std::memory_order_acquire)) {
      const auto start = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(mutex_);
      physics_sleeping_ = true;
      done_.wait(lock, [this] { return !job_.load(std::memory_order_relaxed); });
      physics_sleeping_ = false;
      wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ++waits_;
    }
  }

  void work() {
    pthread_setname_np(pthread_self(), "mjfast-lidar");
    while (true) {
      // After a cast the next job often comes soon (the physics thread was waiting for this
      // one): spin for it a while before sleeping, sparing both sides a wake-up syscall.
      const auto until = std::chrono::steady_clock::now() + kWorkerSpin;
      while (!job_.load(std::memory_order_acquire) && !stop_.load(std::memory_order_acquire) &&
             std::chrono::steady_clock::now() < until) {
      }
      {
        std::unique_lock<std::mutex> lock(mutex_);
        worker_sleeping_ = true;
        wake_.wait(lock, [this] {
          return job_.load(std::memory_order_relaxed) || stop_.load(std::memory_order_relaxed);
        });
        worker_sleeping_ = false;
        if (stop_.load(std::memory_order_relaxed)) return;
      }
      bool ok = true;
      try {
        cast(worker_model_, worker_data_, *worker_scan_);
        finish(*worker_scan_);
      } catch (
          const std::exception& e) {  // a failed cast must not leave the physics thread waiting
        ok = false;
        std::fprintf(stderr, "mjfast: plugin '%s': lidar cast failed: %s\n", name().c_str(),
                     e.what());
      }
      bool wake = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        job_ok_ = ok;
        job_.store(false, std::memory_order_release);
        wake = physics_sleeping_;
      }
      if (wake) done_.notify_one();
    }
  }

  // Waits for a cast in flight and drops its result (a reset or an unload).
  void drain() {
    if (async_ && pending_) collect();
  }

  void stop_worker() {
    if (!worker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_.store(true, std::memory_order_release);
    }
    wake_.notify_one();
    worker_.join();  // a cast in flight finishes first: the worker checks stop_ between casts
    pending_ = false;
    mj_deleteData(worker_data_);
    worker_data_ = nullptr;
  }

  // Configuration.
  int site_ = -1;  // the site the rays start at, or -1: body_'s frame moved by the offset
  int body_ = 0;
  mjtNum offset_pos_[3] = {0, 0, 0};
  mjtNum offset_rotation_[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  std::string frame_;
  std::string topic_;  // `topic`; empty: `~scan` (one ring) or `~points`
  int exclude_ = -1;
  double range_min_ = 0.0;
  double range_max_ = 0.0;
  double noise_std_ = 0.0;
  std::uint64_t seed_ = 0;
  std::vector<mjtByte> geomgroup_;  // empty: every group
  bool async_ = false;
  bool visualize_ = false;
  int rows_ = 0;
  int columns_ = 0;
  int rays_ = 0;
  bool one_ring_ = true;
  double angle_min_ = 0.0;
  double angle_max_ = 0.0;
  double angle_increment_ = 0.0;
  std::vector<double> directions_;  // site frame, rays x 3
  double period_ = 0.1;
  double half_step_ = 0.0;

  // Physics-side state.
  Window window_{0.0, 0.0};
  std::mt19937_64 generator_;
  std::normal_distribution<double> normal_;
  std::unique_ptr<Scan> scan_;
  std::uint64_t scans_ = 0;
  std::uint64_t waits_ = 0;
  double wait_s_ = 0.0;
  std::uint64_t dropped_ = 0;
  bool has_visual_ = false;
  mjtNum visual_origin_[3] = {0, 0, 0};
  std::vector<mjtNum> visual_hits_;

  // Async: the worker and its hand-off. job_ is true from a snapshot until its cast is done.
  const mjModel* worker_model_ = nullptr;
  mjData* worker_data_ = nullptr;
  std::unique_ptr<Scan> worker_scan_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  // Set under mutex_ (so that a sleeper's flag is read consistently), read spinning without it.
  std::atomic<bool> job_{false};
  std::atomic<bool> stop_{false};
  bool job_ok_ = false;            // under mutex_, read by the physics thread once job_ is false
  bool worker_sleeping_ = false;   // under mutex_
  bool physics_sleeping_ = false;  // under mutex_
  bool pending_ = false;           // physics side: a snapshot was handed over and not collected yet
};

}  // namespace
}  // namespace mjfast_plugins

using mjfast_plugins::Lidar;
MJFAST_PLUGIN(Lidar)
