/* mjfast native plugin C ABI, version 1 (SPEC section 9).
 *
 * A native plugin library exports one entry function per plugin class,
 *     const mjfast_plugin_api* <symbol>(void);
 * (mjfast/plugin.hpp's MJFAST_PLUGIN(Class) defines it as `mjfast_plugin_<Class>`). The table it
 * returns must live as long as the library. mjfast reads `abi_version` and `struct_size` first and
 * refuses the plugin (a `factory` load failure) unless abi_version == MJFAST_PLUGIN_ABI_VERSION.
 *
 * Only C types cross this boundary: C++ exceptions are caught inside the library and returned as
 * a status code plus a message, so a library built with another C++ runtime works. The functions
 * are called by one thread at a time per instance (mjfast's plugin host serialises them).
 *
 * Status codes: MJFAST_OK (0), MJFAST_FALSE (1: load/activate returned false), MJFAST_ERROR (-1:
 * the callback raised; its message is in the error buffer, NUL-terminated, truncated to fit).
 */
#ifndef MJFAST_PLUGIN_ABI_H_
#define MJFAST_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#include <mujoco/mujoco.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MJFAST_PLUGIN_ABI_VERSION 1u

#define MJFAST_OK 0
#define MJFAST_FALSE 1
#define MJFAST_ERROR (-1)

/* Callback bits of mjfast_plugin_api.callbacks: which callbacks mjfast dispatches at all. */
#define MJFAST_CB_CONTROL (1u << 0)
#define MJFAST_CB_PASSIVE (1u << 1)
#define MJFAST_CB_RENDER (1u << 2)
#define MJFAST_CB_LAST_STAGE (1u << 3)
#define MJFAST_CB_GEOM_CHANGED (1u << 4)
#define MJFAST_CB_RESET (1u << 5)
#define MJFAST_CB_PRE_STEP (1u << 6)
#define MJFAST_CB_UPDATE_READ (1u << 7)
#define MJFAST_CB_UPDATE_WRITE (1u << 8)

typedef struct mjfast_error {
  char message[1024];
} mjfast_error;

/* Receives the reply of mjfast_plugin_api.call; may be called several times (appends). */
typedef void (*mjfast_string_sink)(void* context, const char* data, size_t size);

typedef struct mjfast_plugin_api {
  uint32_t abi_version; /* MJFAST_PLUGIN_ABI_VERSION of the header the library was built with */
  uint32_t struct_size; /* sizeof(mjfast_plugin_api) in that header */
  const char* class_name;
  uint32_t callbacks; /* MJFAST_CB_* bits */

  /* Instantiation: configuration as a JSON object. NULL (with the error set) on failure. */
  void* (*create)(const char* name, const char* type, const char* config_json, mjfast_error* error);
  void (*destroy)(void* instance); /* never fails; called after unload, or instead of it */

  int (*load)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*activate)(void* instance, mjfast_error* error);
  int (*unload)(void* instance, mjfast_error* error);

  /* MujocoPlugin callbacks. */
  int (*control)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*passive)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*render)(void* instance, const mjModel* m, mjData* d, mjvScene* scene, mjfast_error* error);
  int (*last_stage)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*geom_changed)(void* instance, const mjModel* m, mjData* d, int geom_id,
                      mjfast_error* error);
  /* After a world reset: MujocoPlugin::reset() and ControlPlugin::on_reset(data), in that order. */
  int (*reset)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);

  /* ControlPlugin hooks. */
  int (*pre_step)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*update_read)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);
  int (*update_write)(void* instance, const mjModel* m, mjData* d, mjfast_error* error);

  /* Escape hatch for user code (env.acquire_plugin(...).call(command, argument)). */
  int (*call)(void* instance, const char* command, const char* argument, mjfast_string_sink sink,
              void* sink_context, mjfast_error* error);
} mjfast_plugin_api;

typedef const mjfast_plugin_api* (*mjfast_plugin_entry)(void);

#ifdef __cplusplus
}
#endif

#endif /* MJFAST_PLUGIN_ABI_H_ */
