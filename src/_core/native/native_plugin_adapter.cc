#include "native/native_plugin_adapter.h"

#include <dlfcn.h>

#include <charconv>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <utility>

#include "common/mujoco_guard.h"

namespace mjfast {
namespace {

// Libraries stay open for the life of the process: unloading C++ code whose static objects or
// thread-locals may still be referenced (or whose destructors run at exit) is not worth the risk,
// and a reload re-creates instances, not libraries. Its place in the lock order: env_core.h.
std::mutex library_mutex;
std::unordered_map<std::string, void*>& open_libraries() {
  static auto* libraries = new std::unordered_map<std::string, void*>();  // never destroyed
  return *libraries;
}

void* open_library(const std::string& path) {
  std::lock_guard<std::mutex> lock(library_mutex);
  auto it = open_libraries().find(path);
  if (it != open_libraries().end()) return it->second;
  // RTLD_LOCAL: two plugin libraries may define the same C++ symbols without clashing.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    throw std::runtime_error("native plugin library '" + path +
                             "' failed to load: " + (reason ? reason : "unknown dlopen error"));
  }
  open_libraries().emplace(path, handle);
  return handle;
}

// {"key": number, ...} -> figures; nullopt for anything else (no partial result).
std::optional<std::map<std::string, double>> flat_figures(const std::string& text) {
  std::map<std::string, double> figures;
  std::size_t pos = 0;
  const auto space = [&] {
    while (pos < text.size() && std::strchr(" \t\r\n", text[pos]) != nullptr) ++pos;
  };
  const auto take = [&](char c) {
    space();
    if (pos >= text.size() || text[pos] != c) return false;
    ++pos;
    return true;
  };
  if (!take('{')) return std::nullopt;
  if (take('}')) {
    space();
    return pos == text.size() ? std::optional(figures) : std::nullopt;
  }
  while (true) {
    if (!take('"')) return std::nullopt;
    const std::size_t end = text.find('"', pos);
    if (end == std::string::npos) return std::nullopt;
    std::string key = text.substr(pos, end - pos);
    if (key.find('\\') != std::string::npos) return std::nullopt;  // no escapes in a figure name
    pos = end + 1;
    if (!take(':')) return std::nullopt;
    space();
    double value = 0.0;
    const std::from_chars_result read =
        std::from_chars(text.data() + pos, text.data() + text.size(), value);
    if (read.ec != std::errc()) return std::nullopt;
    pos = static_cast<std::size_t>(read.ptr - text.data());
    figures[std::move(key)] = value;
    if (take(',')) continue;
    if (!take('}')) return std::nullopt;
    space();
    return pos == text.size() ? std::optional(figures) : std::nullopt;
  }
}

}  // namespace

NativePluginAdapter::NativePluginAdapter(std::string name, std::string type,
                                         std::string library_path, std::string symbol,
                                         const std::string& config_json, CameraOpener camera_opener,
                                         Publisher publisher, std::int64_t world_index)
    : name_(std::move(name)),
      type_(std::move(type)),
      library_path_(std::move(library_path)),
      symbol_(std::move(symbol)),
      services_(std::make_unique<NativeHostServices>(std::move(camera_opener), std::move(publisher),
                                                     world_index)) {
  void* library = open_library(library_path_);
  dlerror();
  void* entry = dlsym(library, symbol_.c_str());
  if (entry == nullptr) {
    throw std::runtime_error("native plugin library '" + library_path_ + "' has no symbol '" +
                             symbol_ + "'");
  }
  api_ = reinterpret_cast<mjfast_plugin_entry>(entry)();
  if (api_ == nullptr) {
    throw std::runtime_error("native plugin library '" + library_path_ + "': " + symbol_ +
                             "() returned no plugin table");
  }
  // abi_version and struct_size are the first fields of every ABI version: safe to read first.
  if (api_->abi_version != MJFAST_PLUGIN_ABI_VERSION) {
    throw std::runtime_error("native plugin library '" + library_path_ + "': " + symbol_ +
                             " was built for mjfast plugin ABI version " +
                             std::to_string(api_->abi_version) + ", but this mjfast supports " +
                             "version " + std::to_string(MJFAST_PLUGIN_ABI_VERSION) +
                             " (rebuild the plugin against this mjfast)");
  }
  // Tables from before set_host was added are complete version 1 tables.
  if (api_->struct_size < MJFAST_PLUGIN_API_V1_SIZE) {
    throw std::runtime_error("native plugin library '" + library_path_ + "': " + symbol_ +
                             " has a truncated plugin table (" + std::to_string(api_->struct_size) +
                             " bytes, expected at least " +
                             std::to_string(MJFAST_PLUGIN_API_V1_SIZE) + ")");
  }
  error_.message[0] = '\0';
  instance_ = api_->create(name_.c_str(), type_.c_str(), config_json.c_str(), &error_);
  if (instance_ == nullptr) {
    throw std::runtime_error(std::string("native plugin '") + name_ + "' (" + type_ +
                             ") could not be created: " +
                             (error_.message[0] ? error_.message : "create() returned null"));
  }
  const bool has_set_host =
      api_->struct_size >= offsetof(mjfast_plugin_api, set_host) + sizeof(api_->set_host);
  if (has_set_host && api_->set_host != nullptr) {
    api_->set_host(instance_, NativeHostServices::table(), services_.get());
  }
  if (MJFAST_PLUGIN_API_HAS_STATE(api_)) {
    get_state_ = api_->get_state;
    set_state_ = api_->set_state;
  }
}

NativePluginAdapter::~NativePluginAdapter() {
  if (instance_ != nullptr) api_->destroy(instance_);
}

void NativePluginAdapter::throw_error(int status) {
  std::string message = error_.message;
  error_.message[0] = '\0';
  if (message.empty()) message = "native plugin failed without a message";
  if (status == MJFAST_LOGIC_ERROR) throw std::logic_error(message);
  throw std::runtime_error(message);
}

bool NativePluginAdapter::load(const mjModel* m, mjData* d) {
  NativeHostServices::LoadScope loading(*services_);
  const int status = api_->load(instance_, m, d, &error_);
  check(status);
  return status == MJFAST_OK;
}

bool NativePluginAdapter::activate() {
  const int status = api_->activate(instance_, &error_);
  check(status);
  return status == MJFAST_OK;
}

void NativePluginAdapter::unload() {
  if (unloaded_) return;
  unloaded_ = true;
  error_.message[0] = '\0';
  // From a user thread (reload, close): a MuJoCo error in the plugin's code is its error, not the
  // end of the process; the same for statistics() and call() below.
  const mujoco_guard::Scope guard;
  const int status = api_->unload(instance_, &error_);
  if (status != MJFAST_ERROR && status != MJFAST_LOGIC_ERROR) return;
  // The host ignores unload errors (one failing unload must not keep the others alive), so this
  // line is the only trace of it; one fprintf keeps it a single line even with other writers.
  std::fprintf(stderr, "mjfast: plugin '%s' raised in unload(): %s\n", name_.c_str(),
               error_.message[0] ? error_.message : "native plugin failed without a message");
  error_.message[0] = '\0';
}

DirectCallback NativePluginAdapter::direct(Callback callback) {
  decltype(DirectCallback::function) function = nullptr;
  switch (callback) {
    case Callback::kControl: function = api_->control; break;
    case Callback::kPassive: function = api_->passive; break;
    case Callback::kLastStage: function = api_->last_stage; break;
    case Callback::kReset: function = api_->reset; break;
    case Callback::kPreStep: function = api_->pre_step; break;
    case Callback::kUpdateRead: function = api_->update_read; break;
    case Callback::kUpdateWrite: function = api_->update_write; break;
    case Callback::kRender:
    case Callback::kGeomChanged: break;  // other arguments: through the virtual
  }
  return {function, instance_, &error_};
}

std::map<std::string, double> NativePluginAdapter::statistics() {
  std::string reply;
  auto sink = [](void* context, const char* data, std::size_t size) {
    static_cast<std::string*>(context)->append(data, size);
  };
  if (api_->call == nullptr) return {};  // a table without call (e.g. a minimal C plugin)
  const mujoco_guard::Scope guard;
  const int status = api_->call(instance_, "statistics", "", sink, &reply, &error_);
  error_.message[0] = '\0';  // no such command: no figures, not a failure
  if (status != MJFAST_OK) return {};
  return flat_figures(reply).value_or(std::map<std::string, double>{});
}

namespace {

constexpr std::size_t kBytesHeader = 9;  // 'b' and a u64 length: an encoded bytes value

}  // namespace

std::string NativePluginAdapter::get_state() {
  std::string value(kBytesHeader, '\0');
  value[0] = 'b';
  auto sink = [](void* context, const char* data, std::size_t size) {
    static_cast<std::string*>(context)->append(data, size);
  };
  const mujoco_guard::Scope guard;
  check(get_state_(instance_, sink, &value, &error_));
  std::uint64_t size = value.size() - kBytesHeader;
  for (std::size_t i = 1; i < kBytesHeader; ++i, size >>= 8) {
    value[i] = static_cast<char>(size & 0xff);
  }
  return value;
}

void NativePluginAdapter::set_state(const std::string& value) {
  std::uint64_t size = 0;
  for (std::size_t i = kBytesHeader - 1; i >= 1 && value.size() >= kBytesHeader; --i) {
    size = (size << 8) | static_cast<unsigned char>(value[i]);
  }
  if (value.size() < kBytesHeader || value[0] != 'b' || size != value.size() - kBytesHeader) {
    throw std::invalid_argument("the state of native plugin '" + name_ +
                                "' must be bytes (what its get_state() gave)");
  }
  const mujoco_guard::Scope guard;
  check(set_state_(instance_, value.data() + kBytesHeader, value.size() - kBytesHeader, &error_));
}

std::string NativePluginAdapter::call(const std::string& command, const std::string& argument) {
  if (api_->call == nullptr) {
    throw std::logic_error("call('" + command + "'): this native plugin implements no commands");
  }
  std::string reply;
  auto sink = [](void* context, const char* data, std::size_t size) {
    static_cast<std::string*>(context)->append(data, size);
  };
  const mujoco_guard::Scope guard;
  check(api_->call(instance_, command.c_str(), argument.c_str(), sink, &reply, &error_));
  return reply;
}

}  // namespace mjfast
