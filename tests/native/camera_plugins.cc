// A native plugin using offscreen cameras through mjfast_host_api (tests/test_native_cameras.py).
#include <cstdint>
#include <cstdio>
#include <mjfast/plugin.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// FNV-1a, 64 bits: the test computes the same over the reference pixels.
std::uint64_t fnv1a(const void* data, std::size_t size) {
  std::uint64_t hash = 14695981039346656037ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string error_text(const std::exception& error) {
  const bool logic = dynamic_cast<const std::logic_error*>(&error) != nullptr;
  return std::string(logic ? "logic: " : "runtime: ") + error.what();
}

// Opens `camera` in load() (or, with open_in: last_stage, in its first last_stage, which must be
// refused), enables frames and in last_stage takes the latest frame, keeping its metadata, its
// checksum and its pixels for call(). `bare` opens a second handle on the camera without frames.
class CameraProbe final : public mjfast::Plugin {
 public:
  explicit CameraProbe(const mjfast::PluginContext& context)
      : Plugin(context),
        camera_name_(config().string("camera", "front")),
        open_in_(config().string("open_in", "load")),
        hide_group_(config().integer("hide_group", -1)) {}

  bool load(const mjModel*, mjData*) override {
    if (open_in_ != "load") return true;
    camera_ = open_offscreen_camera(camera_name_);
    if (hide_group_ >= 0) camera_.set_geom_group(hide_group_, false);  // queued until bound
    camera_.enable_frames();
    try {
      camera_.geom_group_enabled(0);  // needs a live camera: none until the load completes
      load_probe_ = "live";
    } catch (const std::exception& error) {
      load_probe_ = error_text(error);
    }
    bare_ = open_offscreen_camera(camera_name_);
    return true;
  }

  void last_stage(const mjModel*, mjData*) override {
    if (open_in_ == "last_stage") {
      open_offscreen_camera(camera_name_);  // throws: only load() may open cameras
      return;
    }
    mjfast::FrameLease lease = camera_.take_latest(mjfast::Plane::kRgb);
    if (!lease) return;
    ++frames_;
    simulation_time_ns_ = lease.simulation_time_ns();
    capture_id_ = lease.capture_id();
    width_ = lease.width();
    height_ = lease.height();
    checksum_ = fnv1a(lease.data(), lease.size());
    const auto* bytes = static_cast<const unsigned char*>(lease.data());
    pixels_.assign(bytes, bytes + lease.size());
  }

  std::string call(const std::string& command, const std::string&) override {
    if (command == "frame") {
      return std::to_string(frames_) + " " + std::to_string(simulation_time_ns_) + " " +
             std::to_string(capture_id_) + " " + std::to_string(width_) + " " +
             std::to_string(height_) + " " + std::to_string(checksum_);
    }
    if (command == "pixels") {
      std::string hex;
      hex.reserve(pixels_.size() * 2);
      char pair[3];
      for (unsigned char byte : pixels_) {
        std::snprintf(pair, sizeof(pair), "%02x", byte);
        hex += pair;
      }
      return hex;
    }
    if (command == "load_probe") return load_probe_;
    if (command == "group_enabled") return camera_.geom_group_enabled(hide_group_) ? "1" : "0";
    if (command == "open") open_offscreen_camera(camera_name_);  // refused outside load()
    if (command == "take_bare") bare_.take_latest();             // before enable_frames
    if (command == "enable_again") camera_.enable_frames();      // twice on one handle
    if (command == "take_unopened") unopened_.take_latest();     // a default-constructed Camera
    if (command == "close_and_take") {
      camera_.close();
      camera_.take_latest();  // a closed mjfast::Camera
    }
    return Plugin::call(command, "");
  }

 private:
  std::string camera_name_;
  std::string open_in_;
  int hide_group_;
  mjfast::Camera camera_;
  mjfast::Camera bare_;
  mjfast::Camera unopened_;
  std::string load_probe_;
  long frames_ = 0;
  std::int64_t simulation_time_ns_ = 0;
  std::uint64_t capture_id_ = 0;
  int width_ = 0;
  int height_ = 0;
  std::uint64_t checksum_ = 0;
  std::vector<unsigned char> pixels_;
};

}  // namespace

MJFAST_PLUGIN(CameraProbe)
