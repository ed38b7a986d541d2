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
 * the callback raised; its message is in the error buffer, NUL-terminated, truncated to fit),
 * MJFAST_LOGIC_ERROR (-2: as MJFAST_ERROR, for a misuse of the contract: mjfast.LogicError /
 * std::logic_error). A plugin returns MJFAST_LOGIC_ERROR only once mjfast handed it a host table
 * (set_host), which says the host understands it.
 *
 * Host services (cameras, SPEC section 10): a table mjfast_host_api that mjfast passes to each
 * instance through mjfast_plugin_api.set_host, after create and before load. The plugin table
 * field is optional within ABI version 1: mjfast reads it only when struct_size covers it, so
 * libraries built against the earlier version 1 header still load (and get no host services).
 * The host table grows only at its end; check its struct_size before using a later field.
 *
 * Simulation requests (SPEC section 13), added at the end of the host table: request_pause and
 * request_reset ask the env to pause its physics thread or reset the world at its next step
 * boundary. They are requests, not calls: they return at once, from any callback (load included)
 * on any thread; MJFAST_HOST_API_HAS_REQUESTS(host) says whether the host table has them.
 *
 * Publishing (later still, at the end of the host table): publish puts a message on the env's bus
 * as a Python dict; MJFAST_HOST_API_HAS_PUBLISH(host) says whether the host table has it.
 *
 * World index (last, at the end of the host table): world_index returns the index of the world
 * the instance belongs to in a VectorEnv (SPEC section 21), 0 in a MujocoEnv;
 * MJFAST_HOST_API_HAS_WORLD_INDEX(host) says whether the host table has it.
 *
 * State (SPEC section 20), added at the end of the plugin table after set_host: get_state and
 * set_state let env.get_state()/set_state() take and restore the instance's own state (a noise
 * generator, a schedule, an integrator) as bytes of the plugin's own format. Optional: mjfast
 * reads them only when struct_size covers them (MJFAST_PLUGIN_API_HAS_STATE) and both are set.
 */
#ifndef MJFAST_PLUGIN_ABI_H_
#define MJFAST_PLUGIN_ABI_H_

#include <mujoco/mujoco.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MJFAST_PLUGIN_ABI_VERSION 1u

#define MJFAST_OK 0
#define MJFAST_FALSE 1
#define MJFAST_ERROR (-1)
#define MJFAST_LOGIC_ERROR (-2)

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

/* Image planes of a camera frame (SPEC section 10). */
#define MJFAST_PLANE_RGB 0          /* height x width x 3 uint8 */
#define MJFAST_PLANE_DEPTH 1        /* height x width float32, metres */
#define MJFAST_PLANE_SEGMENTATION 2 /* height x width x 2 int32: object id, object type */

typedef struct mjfast_camera mjfast_camera;           /* an open camera handle (opaque) */
typedef struct mjfast_frame_lease mjfast_frame_lease; /* a leased frame (opaque) */

/* A leased frame's pixels and metadata: valid until its lease is released. */
typedef struct mjfast_frame_view {
  const void* data; /* read-only; row-major, height rows from the top */
  size_t size;      /* bytes at data */
  int32_t plane;    /* MJFAST_PLANE_* */
  int32_t width;
  int32_t height;
  int64_t simulation_time_ns; /* simulated time of the rendered state */
  uint64_t capture_id;
  uint64_t frame_generation;
} mjfast_frame_view;

/* One entry of a published message (publish below): `key` -> a Python float/int/str, or a numpy
 * array (a copy) of `shape`. */
#define MJFAST_FIELD_FLOAT64 0 /* double */
#define MJFAST_FIELD_FLOAT32 1 /* float */
#define MJFAST_FIELD_INT64 2   /* int64_t */
#define MJFAST_FIELD_INT32 3   /* int32_t */
#define MJFAST_FIELD_UINT8 4   /* uint8_t */
#define MJFAST_FIELD_STRING 5  /* data: NUL-terminated UTF-8; ndim must be 0 */
#define MJFAST_FIELD_MAX_DIMS 4

typedef struct mjfast_message_field {
  const char* key; /* NUL-terminated UTF-8; a later field with the same key replaces an earlier */
  int32_t type;    /* MJFAST_FIELD_* */
  int32_t ndim;    /* 0: a scalar (Python float or int; data points at one element);
                    * 1..MJFAST_FIELD_MAX_DIMS: a C-ordered numpy array of `shape` */
  int64_t shape[MJFAST_FIELD_MAX_DIMS]; /* the first ndim are used, each >= 0 */
  const void* data; /* read during the publish call only; may be NULL for an empty array */
} mjfast_message_field;

/* Host services, with the contract of mjfast's Python camera handle (SPEC section 10). Functions
 * returning int return MJFAST_OK, MJFAST_ERROR (a runtime error: "camera is unavailable during
 * reload") or MJFAST_LOGIC_ERROR (a misuse: opening outside load, take_latest before
 * enable_frames, enable_frames twice, an argument out of range), with the message in `error`.
 * Camera calls may be made from any callback; a camera is used by one thread at a time. */
typedef struct mjfast_host_api {
  uint32_t struct_size; /* sizeof(mjfast_host_api) in the host's header */

  /* Only from the instance's load(): opens the model's camera `name` (parameters from the
   * parameter server); an unknown name is MJFAST_ERROR naming it and listing the cameras. */
  int (*open_camera)(void* host_context, const char* name, mjfast_camera** out_camera,
                     mjfast_error* error);
  void (*camera_close)(mjfast_camera* camera); /* never fails; leases stay valid */

  int (*camera_set_geom_group)(mjfast_camera* camera, int group, int enabled, mjfast_error* error);
  int (*camera_set_visual_flag)(mjfast_camera* camera, int flag, int enabled, mjfast_error* error);
  int (*camera_enable_frames)(mjfast_camera* camera, int history, mjfast_error* error);
  int (*camera_geom_group_enabled)(mjfast_camera* camera, int group, int* out_enabled,
                                   mjfast_error* error);
  int (*camera_visual_flag_enabled)(mjfast_camera* camera, int flag, int* out_enabled,
                                    mjfast_error* error);
  int (*camera_plane_configured)(mjfast_camera* camera, int plane, int* out_configured,
                                 mjfast_error* error);
  /* The newest completed frame newer than the last one this camera took: *out_lease is set (and
   * *out_view filled) or NULL when there is none. The frame is never overwritten or freed until
   * lease_release. */
  int (*camera_take_latest)(mjfast_camera* camera, int plane, mjfast_frame_lease** out_lease,
                            mjfast_frame_view* out_view, mjfast_error* error);
  void (*lease_release)(mjfast_frame_lease* lease); /* NULL is ignored */

  /* Simulation requests (later than the camera services: check MJFAST_HOST_API_HAS_REQUESTS).
   * request_pause: the env's physics thread (env.start) steps no more from its next step
   * boundary, as after env.pause(); env.resume() undoes it. A user's own env.step(n) calls still
   * run their n steps.
   * request_reset: before the next step (whoever steps: the physics thread, even a paused one, or
   * env.step), the env runs env.reset(keyframe) (NULL: the initial state), with every plugin's
   * reset/on_reset; a later request before then replaces an earlier one. An unknown keyframe is
   * logged by the env (logger mjfast.env) when it is honoured.
   * Both return MJFAST_OK, or MJFAST_LOGIC_ERROR when the instance has no env to ask (e.g. the
   * env was closed). */
  int (*request_pause)(void* host_context, mjfast_error* error);
  int (*request_reset)(void* host_context, const char* keyframe, mjfast_error* error);

  /* Publishing (later than the simulation requests: check MJFAST_HOST_API_HAS_PUBLISH).
   * Publishes {key: value, ...} of the `count` fields on `topic` on the env's bus, as the
   * plugin's Python node would: a relative or `~private` topic resolves in the plugin's namespace
   * (`~scan` -> `<env namespace>/<plugin name>/scan`), a `/absolute` one is global. The host
   * copies everything before it returns and delivers the message to the topic's subscribers on
   * the calling thread, which takes the GIL for that (and only then). From any callback or any
   * thread of the plugin's own, while the instance lives.
   * Returns MJFAST_OK; MJFAST_ERROR for a failed publication (a bad topic, a subscriber-side
   * failure that the bus raises); MJFAST_LOGIC_ERROR for a malformed field (unknown type, bad
   * ndim or shape, NULL key) or when the env provides no bus to this instance. */
  int (*publish)(void* host_context, const char* topic, const mjfast_message_field* fields,
                 size_t count, mjfast_error* error);

  /* World index (later than publishing: check MJFAST_HOST_API_HAS_WORLD_INDEX). The index of this
   * instance's world in its VectorEnv (0 .. num_envs - 1), 0 in a MujocoEnv; fixed for the
   * instance's life. Never fails; from any callback or thread, load included. */
  int64_t (*world_index)(void* host_context);
} mjfast_host_api;

/* The host table as first released (camera services only): the smallest struct_size a plugin
 * built with this header accepts in set_host. */
#define MJFAST_HOST_API_CAMERAS_SIZE offsetof(mjfast_host_api, request_pause)
#define MJFAST_HOST_API_HAS_REQUESTS(host) \
  ((host)->struct_size >=                  \
   offsetof(mjfast_host_api, request_reset) + sizeof(((mjfast_host_api*)0)->request_reset))

#define MJFAST_HOST_API_HAS_PUBLISH(host) \
  ((host)->struct_size >=                 \
   offsetof(mjfast_host_api, publish) + sizeof(((mjfast_host_api*)0)->publish))

#define MJFAST_HOST_API_HAS_WORLD_INDEX(host) \
  ((host)->struct_size >=                     \
   offsetof(mjfast_host_api, world_index) + sizeof(((mjfast_host_api*)0)->world_index))

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

  /* Optional (may be NULL; absent from tables built before it): receives the host services for
   * this instance, valid until destroy. Called once, after create and before load. */
  void (*set_host)(void* instance, const mjfast_host_api* host, void* host_context);

  /* Optional state (may be NULL, both or neither; absent from tables built before them: see
   * MJFAST_PLUGIN_API_HAS_STATE). Called at a step boundary with no callback of the env in
   * flight, by one thread at a time.
   * get_state writes the instance's state through `sink` (one or more calls, appended; no call:
   * empty bytes); mjfast keeps the bytes in the SimState, where Python sees them as `bytes`.
   * set_state restores a state get_state wrote (maybe in another process, or another instance
   * of the same type and configuration): `size` bytes at `data`, valid during the call. It must
   * check them first and, returning MJFAST_ERROR, leave the instance as it was. */
  int (*get_state)(void* instance, mjfast_string_sink sink, void* sink_context,
                   mjfast_error* error);
  int (*set_state)(void* instance, const char* data, size_t size, mjfast_error* error);
} mjfast_plugin_api;

/* The original version 1 table, without set_host: the smallest struct_size mjfast accepts. */
#define MJFAST_PLUGIN_API_V1_SIZE offsetof(mjfast_plugin_api, set_host)
/* Whether a plugin table has the state functions' fields (they may still be NULL). */
#define MJFAST_PLUGIN_API_HAS_STATE(api) \
  ((api)->struct_size >=                 \
   offsetof(mjfast_plugin_api, set_state) + sizeof(((mjfast_plugin_api*)0)->set_state))

typedef const mjfast_plugin_api* (*mjfast_plugin_entry)(void);

#ifdef __cplusplus
}
#endif

#endif /* MJFAST_PLUGIN_ABI_H_ */
