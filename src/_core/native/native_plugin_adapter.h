// NativePluginAdapter: puts a plugin compiled to a shared library (the C ABI of
// mjfast/plugin_abi.h) behind IPluginAdapter. It loads the library, checks the ABI version,
// creates the instance and forwards each callback through the library's function table with no
// Python involved. Errors come back as status codes and are rethrown here as std::runtime_error,
// so the host isolates them exactly like a Python plugin's (std::logic_error for
// MJFAST_LOGIC_ERROR). Host services (cameras) reach the instance through NativeHostServices.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "native/native_host_services.h"
#include "plugin_abi.h"
#include "plugin_host/plugin_adapter.h"

namespace mjfast {

// callbacks() passes a plugin's MJFAST_CB_* bits through as a CallbackMask unchanged, so each bit
// must be mask_of() of the same callback: reordering either list must fail to compile.
static_assert(MJFAST_CB_CONTROL == mask_of(Callback::kControl));
static_assert(MJFAST_CB_PASSIVE == mask_of(Callback::kPassive));
static_assert(MJFAST_CB_RENDER == mask_of(Callback::kRender));
static_assert(MJFAST_CB_LAST_STAGE == mask_of(Callback::kLastStage));
static_assert(MJFAST_CB_GEOM_CHANGED == mask_of(Callback::kGeomChanged));
static_assert(MJFAST_CB_RESET == mask_of(Callback::kReset));
static_assert(MJFAST_CB_PRE_STEP == mask_of(Callback::kPreStep));
static_assert(MJFAST_CB_UPDATE_READ == mask_of(Callback::kUpdateRead));
static_assert(MJFAST_CB_UPDATE_WRITE == mask_of(Callback::kUpdateWrite));
static_assert(kCallbackCount == 9, "a new Callback needs its MJFAST_CB_* bit in plugin_abi.h");

class NativePluginAdapter final : public IPluginAdapter {
 public:
  // Opens `library_path` (kept open for the life of the process), looks up `symbol`, checks the
  // ABI version and creates the instance. Throws std::runtime_error naming the library and the
  // reason (a factory failure). `camera_opener` serves the instance's open_offscreen_camera()
  // (empty: the instance gets host services that refuse to open cameras); `publisher` serves its
  // publish() (empty: refused); `world_index` is its world's in a VectorEnv.
  NativePluginAdapter(std::string name, std::string type, std::string library_path,
                      std::string symbol, const std::string& config_json,
                      CameraOpener camera_opener = {}, Publisher publisher = {},
                      std::int64_t world_index = 0);
  ~NativePluginAdapter() override;
  NativePluginAdapter(const NativePluginAdapter&) = delete;
  NativePluginAdapter& operator=(const NativePluginAdapter&) = delete;

  bool load(const mjModel* m, mjData* d) override;
  CallbackMask callbacks() override { return api_->callbacks & kKnownCallbacks; }
  // The plugin's own figures: its reply to call("statistics") when that is a flat JSON object of
  // numbers (a plugin without the command, or with another reply, has none).
  std::map<std::string, double> statistics() override;
  bool activate() override;

  // render and geom_changed take more than (model, data): through the virtuals. The other
  // callbacks have no virtual here: the host calls the table's function that direct() gives it.
  void render(const mjModel* m, mjData* d, mjvScene* scene) override {
    check(api_->render(instance_, m, d, scene, &error_));
  }
  void geom_changed(const mjModel* m, mjData* d, int geom_id) override {
    check(api_->geom_changed(instance_, m, d, geom_id, &error_));
  }
  // The plugin table's own function for the (model, data) callbacks: the host calls it directly.
  DirectCallback direct(Callback callback) override;
  void direct_failed(int status) override { check(status); }

  // Never throws: an error from the plugin's unload is printed to stderr (a native plugin has no
  // Python logger) and the unload goes on.
  void unload() override;

  // The plugin table's get_state/set_state, when it has both (SPEC §20). The state value is the
  // plugin's bytes as an encoded bytes value of mjfast's state value encoding
  // (mjfast/model/state.py): tag 'b', the length as a little-endian u64, the bytes.
  bool has_state() const override { return get_state_ != nullptr && set_state_ != nullptr; }
  std::string get_state() override;
  void set_state(const std::string& value) override;

  // The plugin's escape hatch (Plugin::call); throws std::runtime_error with its message.
  std::string call(const std::string& command, const std::string& argument);

  const std::string& name() const { return name_; }
  const std::string& type() const { return type_; }
  const std::string& library_path() const { return library_path_; }
  const std::string& symbol() const { return symbol_; }
  void* instance() const { return instance_; }

 private:
  static constexpr CallbackMask kKnownCallbacks = (CallbackMask{1} << kCallbackCount) - 1;

  void check(int status) {
    if (status == MJFAST_ERROR || status == MJFAST_LOGIC_ERROR) throw_error(status);
  }
  [[noreturn]] void throw_error(int status);

  std::string name_;
  std::string type_;
  std::string library_path_;
  std::string symbol_;
  const mjfast_plugin_api* api_ = nullptr;
  // Outlives the instance (the destructor destroys the instance first), whose destructor may
  // still close cameras through it.
  std::unique_ptr<NativeHostServices> services_;
  void* instance_ = nullptr;
  bool unloaded_ = false;
  decltype(mjfast_plugin_api::get_state) get_state_ = nullptr;
  decltype(mjfast_plugin_api::set_state) set_state_ = nullptr;
  // One per instance: the host serialises every call into an adapter under its mutex.
  mjfast_error error_{};
};

}  // namespace mjfast
