#include "native_plugin_adapter.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <utility>

namespace mjfast {
namespace {

// Libraries stay open for the life of the process: unloading C++ code whose static objects or
// thread-locals may still be referenced (or whose destructors run at exit) is not worth the risk,
// and a reload re-creates instances, not libraries.
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
    throw std::runtime_error("native plugin library '" + path + "' failed to load: " +
                             (reason ? reason : "unknown dlopen error"));
  }
  open_libraries().emplace(path, handle);
  return handle;
}

}  // namespace

NativePluginAdapter::NativePluginAdapter(std::string name, std::string type,
                                         std::string library_path, std::string symbol,
                                         const std::string& config_json)
    : name_(std::move(name)),
      type_(std::move(type)),
      library_path_(std::move(library_path)),
      symbol_(std::move(symbol)) {
  void* library = open_library(library_path_);
  dlerror();
  void* entry = dlsym(library, symbol_.c_str());
  if (entry == nullptr) {
    throw std::runtime_error("native plugin library '" + library_path_ +
                             "' has no symbol '" + symbol_ + "'");
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
  if (api_->struct_size < sizeof(mjfast_plugin_api)) {
    throw std::runtime_error("native plugin library '" + library_path_ + "': " + symbol_ +
                             " has a truncated plugin table (" +
                             std::to_string(api_->struct_size) + " bytes, expected " +
                             std::to_string(sizeof(mjfast_plugin_api)) + ")");
  }
  error_.message[0] = '\0';
  instance_ = api_->create(name_.c_str(), type_.c_str(), config_json.c_str(), &error_);
  if (instance_ == nullptr) {
    throw std::runtime_error(std::string("native plugin '") + name_ + "' (" + type_ +
                             ") could not be created: " +
                             (error_.message[0] ? error_.message : "create() returned null"));
  }
}

NativePluginAdapter::~NativePluginAdapter() {
  if (instance_ != nullptr) api_->destroy(instance_);
}

void NativePluginAdapter::throw_error() {
  const std::string message = error_.message;
  error_.message[0] = '\0';
  throw std::runtime_error(message.empty() ? "native plugin failed without a message" : message);
}

bool NativePluginAdapter::load(const mjModel* m, mjData* d) {
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
  if (api_->unload(instance_, &error_) != MJFAST_ERROR) return;
  // The host ignores unload errors (one failing unload must not keep the others alive), so this
  // line is the only trace of it; one fprintf keeps it a single line even with other writers.
  std::fprintf(stderr, "mjfast: plugin '%s' raised in unload(): %s\n", name_.c_str(),
               error_.message[0] ? error_.message : "native plugin failed without a message");
  error_.message[0] = '\0';
}

std::string NativePluginAdapter::call(const std::string& command, const std::string& argument) {
  std::string reply;
  auto sink = [](void* context, const char* data, std::size_t size) {
    static_cast<std::string*>(context)->append(data, size);
  };
  check(api_->call(instance_, command.c_str(), argument.c_str(), sink, &reply, &error_));
  return reply;
}

}  // namespace mjfast
