/* A version 1 plugin table from before set_host: mjfast must load it and never read past its
 * struct_size (set_host here is a trap that would crash if called). */
#include <mjfast/plugin_abi.h>
#include <stddef.h>
#include <stdint.h>

static int legacy_instance;

static void* legacy_create(const char* name, const char* type, const char* config_json,
                           mjfast_error* error) {
  (void)name, (void)type, (void)config_json, (void)error;
  return &legacy_instance;
}
static void legacy_destroy(void* instance) { (void)instance; }
static int legacy_load(void* instance, const mjModel* m, mjData* d, mjfast_error* error) {
  (void)instance, (void)m, (void)d, (void)error;
  return MJFAST_OK;
}
static int legacy_status(void* instance, mjfast_error* error) {
  (void)instance, (void)error;
  return MJFAST_OK;
}

static mjfast_plugin_api legacy_api = {
    MJFAST_PLUGIN_ABI_VERSION,
    (uint32_t)MJFAST_PLUGIN_API_V1_SIZE,
    "LegacyAbi",
    0u,
    legacy_create,
    legacy_destroy,
    legacy_load,
    legacy_status,
    legacy_status,
};

__attribute__((visibility("default"))) const mjfast_plugin_api* mjfast_plugin_LegacyAbi(void) {
  legacy_api.set_host = (void (*)(void*, const mjfast_host_api*, void*))(uintptr_t)1;
  return &legacy_api;
}

/* A table from before the state functions (it ends right after set_host): mjfast must not read
 * get_state/set_state, which are traps here, and such a plugin simply has no state. */
static mjfast_plugin_api host_era_api = {
    MJFAST_PLUGIN_ABI_VERSION,
    (uint32_t)offsetof(mjfast_plugin_api, get_state),
    "HostEraAbi",
    0u,
    legacy_create,
    legacy_destroy,
    legacy_load,
    legacy_status,
    legacy_status,
};

__attribute__((visibility("default"))) const mjfast_plugin_api* mjfast_plugin_HostEraAbi(void) {
  host_era_api.get_state = (int (*)(void*, mjfast_string_sink, void*, mjfast_error*))(uintptr_t)1;
  host_era_api.set_state = (int (*)(void*, const char*, size_t, mjfast_error*))(uintptr_t)1;
  return &host_era_api;
}
