"""
mjfast's compiled core: EnvCore (stepping, the physics thread, the control bridge's read/write), PluginHost with its Python and native plugin adapters and the callback table (CALLBACKS), RenderCore with offscreen cameras and frame leases, the MuJoCo callback trampolines, VectorCore (many worlds on a worker pool), and the translation of core errors to mjfast.errors.
"""
from __future__ import annotations
import collections.abc
import numpy
import numpy.typing
import typing
__all__: list[str] = ['AdapterEntry', 'CALLBACKS', 'CAMERA_KEYS', 'CONTROL_COMMAND_FIELDS', 'CONTROL_STATE_FIELDS', 'CallbackFree', 'CdrDecoder', 'ControlState', 'DueWindow', 'EnvCore', 'FrameLease', 'GripperCore', 'HandoffRing', 'JointTrajectoryCore', 'LIFECYCLE', 'LifecycleContext', 'MUJOCO_VERSION_BUILT', 'NativeControl', 'NativePluginHandle', 'OffscreenCamera', 'PLANES', 'PLUGIN_ABI_VERSION', 'PluginHost', 'RenderCore', 'StepRecorder', 'TIMING_SAMPLE_INTERVAL', 'VectorCore', 'VectorHold', 'checked_realtime_factor', 'control_hook_owned', 'control_trampoline_address', 'failed_adapter', 'hooks_owned', 'in_plugin_callback', 'interrupted_adapter', 'joint_state_cdr', 'native_adapter', 'pack_direct', 'pack_message', 'passive_hook_owned', 'passive_trampoline_address', 'python_adapter', 'refusal', 'unpack_message']
class CallbackFree:
    def __enter__(self) -> None:
        ...
    def __exit__(self, *args) -> None:
        ...
    def __init__(self) -> None:
        ...
class DueWindow:
    """
    A rate plugin's window of simulated times with nothing due, [low, high): a Python plugin that sets it as its __mjfast_due_window__ has its last_stage_callback called only at the other steps, and those steps take no GIL for it. Empty (every step due) until set.
    """
    def __init__(self) -> None:
        ...
    def get(self) -> tuple[float, float]:
        """
        (low, high)
        """
    def not_due(self, time: typing.SupportsFloat | typing.SupportsIndex) -> bool:
        """
        Whether a step at `time` skips the callback.
        """
    def set(self, low: typing.SupportsFloat | typing.SupportsIndex, high: typing.SupportsFloat | typing.SupportsIndex) -> None:
        """
        Sets the window: the steps whose time t has low <= t < high are not due.
        """
class AdapterEntry:
    @property
    def error(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def type(self) -> str:
        ...
class PluginHost:
    def _acquire_scope(self) -> None:
        ...
    def _in_callback(self) -> bool:
        ...
    def _release_scope(self) -> None:
        ...
    def _scope_held(self) -> bool:
        ...
    def _scoped_backend(self, arg0: str) -> typing.Any:
        ...
    def dispatch_control(self, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        ...
    def dispatch_last_stage(self, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        ...
    def dispatch_passive(self, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        ...
    def dispatch_render(self, scene: typing.Any, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        """
        Dispatch render_callback with `scene` (a mujoco.MjvScene of the env's model).
        """
    def load_generation(self, model_generation: typing.SupportsInt | typing.SupportsIndex, plugin_generation: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def notify_geometry_changed(self, geom_id: typing.SupportsInt | typing.SupportsIndex, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        ...
    def quiesce_and_destroy(self) -> None:
        ...
    def report(self) -> list:
        ...
    def reset(self, model_generation: typing.SupportsInt | typing.SupportsIndex | None = None) -> None:
        ...
    @property
    def generation_active(self) -> bool:
        ...
    @property
    def model_generation(self) -> int:
        ...
    @property
    def plugin_generation(self) -> int:
        ...
class LifecycleContext:
    def __enter__(self) -> None:
        ...
    def __exit__(self, *args) -> None:
        ...
class EnvCore:
    def __init__(self, render_sync: bool = False) -> None:
        ...
    def bind(self, model: typing.Any, data: typing.Any, control_scratch: typing.Any) -> None:
        """
        Bind a mujoco.MjModel, its MjData and the control bridge's scratch MjData (or None, until set_control_scratch); the core holds them until they are replaced and no thread can reach them.
        """
    def check_call(self, what: str, refusals: collections.abc.Sequence[str]) -> None:
        ...
    def check_open(self, what: str) -> None:
        ...
    def clear_simulation_fault(self) -> None:
        ...
    def close(self) -> None:
        ...
    def control_read(self) -> ControlState:
        """
        The newest control state, passed through update_read plugins (SPEC §7).
        """
    def control_write(self, ctrl: typing.Any = None, qfrc_applied: typing.Any = None, xfrc_applied: typing.Any = None) -> None:
        """
        Validate and stage commands, passed through update_write plugins (SPEC §7).
        """
    def get_state(self) -> tuple[numpy.typing.NDArray[numpy.float64], int, str, str, tuple]:
        """
        (physics, step_count, model_signature, model_description, plugins) at a step boundary: physics a read-only float64 array, plugins ((name, type, value), ...).
        """
    def hold_steps(self) -> None:
        ...
    def lifecycle(self, operation: str) -> LifecycleContext:
        ...
    def load_next_plugin_generation(self) -> None:
        ...
    def measured_realtime_factor(self) -> float:
        ...
    def notify_geometry_changed(self, geom_id: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def pause_stepping(self) -> None:
        ...
    def release_steps(self) -> None:
        ...
    def reset_plugins(self) -> None:
        ...
    def reset_step_count(self) -> None:
        ...
    def reset_world(self, keyframe: typing.SupportsInt | typing.SupportsIndex, qpos: typing.Any, qvel: typing.Any, keep_time: bool) -> None:
        """
        The world reset (EnvCore::reset_world), with the steps held by the caller.
        """
    def resume_stepping(self) -> None:
        ...
    def set_control_scratch(self, control_scratch: typing.Any) -> None:
        """
        Give the control bridge its scratch MjData (for the bound model), which bind() was given None for.
        """
    def set_factory(self, factory: typing.Any) -> None:
        ...
    def set_realtime_factor(self, realtime_factor: typing.Any) -> None:
        ...
    def set_reset_request_hooks(self, resolve: typing.Any, report: typing.Any) -> None:
        """
        A plugin's reset request: resolve(keyframe | None) gives its target as reset_world's (keyframe, qpos, qvel, keep_time) or None; report(keyframe | None, message) a reset that failed. The core carries the reset out.
        """
    def set_state(self, physics: typing.Annotated[numpy.typing.ArrayLike, numpy.float64], step_count: typing.SupportsInt | typing.SupportsIndex, signature: str, description: str, plugins: collections.abc.Iterable) -> None:
        ...
    def start(self, realtime_factor: typing.Any, steps: typing.Any = None) -> None:
        """
        Start the physics thread; with `steps`, it stops by itself after exactly that many.
        """
    def statistics(self) -> dict:
        ...
    def step(self, n: typing.Any = 1) -> None:
        """
        Run n physics steps (0 <= n <= 2**63-1); Ctrl-C stops after the step in progress.
        """
    def stop(self) -> None:
        ...
    def wait(self, timeout: typing.Any = None) -> bool:
        """
        Wait until the physics thread has stopped (stop(), its steps run, a fault) or `timeout` seconds have passed; True once it has stopped. Ctrl-C raises KeyboardInterrupt.
        """
    @property
    def has_control_scratch(self) -> bool:
        ...
    @property
    def host(self) -> PluginHost:
        ...
    @property
    def model_generation(self) -> int:
        ...
    @property
    def plugin_generation(self) -> int:
        ...
    @property
    def realtime_factor(self) -> float | None:
        ...
    @property
    def render_core(self) -> RenderCore:
        ...
    @property
    def running(self) -> bool:
        ...
    @property
    def state_size(self) -> int:
        ...
    @property
    def step_count(self) -> int:
        ...
    @property
    def stepping_paused(self) -> bool:
        ...
class ControlState:
    """
    One completed physics step's control state; the arrays are the caller's own copies.
    """
    def __repr__(self) -> str:
        ...
    @property
    def act(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def ctrl(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def qfrc_actuator(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def qpos(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def qvel(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def sensordata(self) -> numpy.typing.NDArray[numpy.float64]:
        ...
    @property
    def time(self) -> float:
        ...
class NativeControl:
    """
    A compiled per-step controller that a Python plugin owns; its adapter dispatches control() without entering Python.
    """
    def control(self, model_address: typing.SupportsInt | typing.SupportsIndex, data_address: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Runs one step's work on the mjModel*/mjData* at these addresses.
        """
class JointTrajectoryCore(NativeControl):
    """
    mjfast/JointTrajectoryController's per-step work (src/_core/control).
    """
    def __init__(self, *, qpos: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], dof: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], actuator: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], velocity_actuator: collections.abc.Sequence[typing.SupportsInt | typing.SupportsIndex], command: str, gains: collections.abc.Sequence[tuple[typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]], ff_velocity_scale: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], open_loop: bool, interpolate: bool, state_period: typing.SupportsFloat | typing.SupportsIndex, feedback_period: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def close(self) -> None:
        ...
    def feedback(self) -> dict:
        """
        The state as of the latest feedback (action_monitor_rate).
        """
    def hold(self) -> None:
        ...
    def last_end(self) -> dict:
        ...
    def set_trajectory(self, goal: typing.SupportsInt | typing.SupportsIndex, start: typing.SupportsFloat | typing.SupportsIndex, times: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], positions: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], velocities: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], accelerations: collections.abc.Sequence[typing.SupportsFloat | typing.SupportsIndex], path_tolerance: collections.abc.Sequence[tuple[typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]], goal_tolerance: collections.abc.Sequence[tuple[typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex]], goal_time: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def snapshot(self) -> dict:
        """
        The state as of the latest state copy (state_publish_rate, and a goal's end).
        """
    def wait(self, seen: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex], timeout_s: typing.SupportsFloat | typing.SupportsIndex) -> tuple[int, int, int]:
        """
        Until the outcome count differs from `seen`'s (a goal ended), close(), or the timeout passes: the (feedback, state, outcome) counts.
        """
class GripperCore(NativeControl):
    """
    mjfast/GripperActionController's per-step work (src/_core/control).
    """
    def __init__(self, *, qpos: typing.SupportsInt | typing.SupportsIndex, dof: typing.SupportsInt | typing.SupportsIndex, actuator: typing.SupportsInt | typing.SupportsIndex, gain: typing.SupportsFloat | typing.SupportsIndex, bias: tuple[typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex], goal_tolerance: typing.SupportsFloat | typing.SupportsIndex, stall_velocity_threshold: typing.SupportsFloat | typing.SupportsIndex, stall_timeout: typing.SupportsFloat | typing.SupportsIndex, feedback_period: typing.SupportsFloat | typing.SupportsIndex, effort: bool = False, gains: tuple[typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex, typing.SupportsFloat | typing.SupportsIndex] = (0.0, 0.0, 0.0, 0.0)) -> None:
        """
        `effort`: the effort command interface (a Pid with `gains` (p, i, d, i_clamp) on the position error, its force clamped to max_effort), else the position one.
        """
    def close(self) -> None:
        ...
    def command(self, goal: typing.SupportsInt | typing.SupportsIndex, position: typing.SupportsFloat | typing.SupportsIndex, max_effort: typing.SupportsFloat | typing.SupportsIndex) -> None:
        ...
    def feedback(self) -> dict:
        ...
    def hold(self) -> None:
        ...
    def last_end(self) -> dict:
        ...
    def wait(self, seen: tuple[typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex, typing.SupportsInt | typing.SupportsIndex], timeout_s: typing.SupportsFloat | typing.SupportsIndex) -> tuple[int, int, int]:
        ...
class NativePluginHandle:
    """
    A native plugin as env.acquire_plugin() yields it.
    """
    def __repr__(self) -> str:
        ...
    def call(self, command: str, argument: str = '') -> str:
        """
        Run the plugin's Plugin::call(command, argument) and return its reply.
        """
    def render_callback(self, model: typing.Any, data: typing.Any, scene: typing.Any) -> None:
        """
        Run the plugin's render callback into `scene` (a mujoco.MjvScene).
        """
    def statistics(self) -> dict[str, float]:
        """
        The plugin's figures: its reply to call('statistics'), a JSON object of numbers.
        """
    @property
    def address(self) -> int:
        """
        The raw instance pointer (the plugin's C++ object).
        """
    @property
    def library(self) -> str:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def symbol(self) -> str:
        ...
    @property
    def type(self) -> str:
        ...
class FrameLease:
    """
    A leased frame: never overwritten or freed while leased.
    """
    def __enter__(self) -> typing.Any:
        ...
    def __exit__(self, *args) -> None:
        ...
    def __repr__(self) -> str:
        ...
    def release(self) -> None:
        ...
    @property
    def capture_id(self) -> int:
        ...
    @property
    def data(self) -> typing.Any:
        """
        Read-only numpy view of the pixels (no copy).
        """
    @property
    def frame_generation(self) -> int:
        ...
    @property
    def height(self) -> int:
        ...
    @property
    def plane(self) -> str:
        ...
    @property
    def released(self) -> bool:
        ...
    @property
    def simulation_time_ns(self) -> int:
        ...
    @property
    def width(self) -> int:
        ...
class OffscreenCamera:
    def __repr__(self) -> str:
        ...
    def enable_frames(self, history: typing.SupportsInt | typing.SupportsIndex = 1) -> None:
        ...
    def geom_group_enabled(self, group: typing.SupportsInt | typing.SupportsIndex) -> bool:
        ...
    def plane_configured(self, plane: str) -> bool:
        ...
    def request_frame(self) -> None:
        ...
    def set_geom_group(self, group: typing.SupportsInt | typing.SupportsIndex, enabled: bool) -> None:
        ...
    def set_visual_flag(self, flag: typing.Any, enabled: bool) -> None:
        ...
    def statistics(self) -> dict:
        ...
    def take_latest(self, plane: str = 'rgb') -> typing.Any:
        ...
    def take_recent(self, plane: str, n: typing.SupportsInt | typing.SupportsIndex) -> list:
        ...
    def visual_flag_enabled(self, flag: typing.Any) -> bool:
        ...
    @property
    def height(self) -> int:
        ...
    @property
    def name(self) -> str:
        ...
    @property
    def rate_hz(self) -> float:
        ...
    @property
    def state(self) -> str:
        ...
    @property
    def width(self) -> int:
        ...
class RenderCore:
    def _set_render_hold(self, held: bool) -> None:
        ...
    def begin_load(self, model: typing.Any, model_address: typing.SupportsInt | typing.SupportsIndex, model_generation: typing.SupportsInt | typing.SupportsIndex) -> None:
        ...
    def bind(self, configs: dict) -> list[str]:
        ...
    def check_can_open(self) -> None:
        ...
    def close(self) -> None:
        ...
    def live_names(self) -> list[str]:
        ...
    def open(self, name: str, config: dict) -> OffscreenCamera:
        ...
    def pending_names(self) -> list[str]:
        ...
    def retire(self) -> None:
        ...
    def statistics(self) -> dict:
        ...
    @property
    def render_sync(self) -> bool:
        ...
class StepRecorder:
    @staticmethod
    def detach(env_core: EnvCore) -> None:
        ...
    def __init__(self, capacity: typing.SupportsInt | typing.SupportsIndex, state_every: typing.SupportsInt | typing.SupportsIndex, state_period: typing.SupportsFloat | typing.SupportsIndex, replaying: bool = False, wait_when_full: bool = False) -> None:
        ...
    def attach(self, env_core: EnvCore) -> None:
        ...
    def close(self) -> None:
        """
        A stepping thread waiting for room goes on (its entry dropped): the writer drains no more.
        """
    def drain(self) -> list:
        """
        [(kind 'state'|'commands', step, step_count, model_generation, time, fields, values)] waiting since the last drain, oldest first: a state's values as float64 bytes, commands' as {field: float64 bytes}
        """
    @property
    def dropped(self) -> int:
        ...
    @property
    def steps(self) -> int:
        ...
    @property
    def waits(self) -> int:
        ...
class HandoffRing:
    def __init__(self, capacity: typing.SupportsInt | typing.SupportsIndex, policy: str) -> None:
        """
        `capacity` preallocated slots; a full ring keeps the newest message per topic ('keep_newest', counted in dropped) or makes push() wait ('wait', counted in waits).
        """
    def close(self) -> None:
        """
        Refuses pushes from now on and wakes every waiter (what waits can still be taken); hand_over's callables are let go.
        """
    def hand_over(self, topic: typing.Any, message: typing.Any) -> None:
        """
        A bus tap's function: push_packed() with stamp() and packed_route(topic)'s route where that is not None, else push() with the stamp.
        """
    def push(self, topic: typing.Any, message: typing.Any, stamp: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> bool:
        """
        Hands (topic, message, stamp) to the writer; False once closed (nothing kept).
        """
    def push_packed(self, topic: typing.Any, message: typing.Any, stamp: typing.SupportsFloat | typing.SupportsIndex, route: typing.Any, offset_ns: typing.SupportsInt | typing.SupportsIndex) -> bool:
        """
        push(), with the message packed now (pack_message) and kept with `route` and the log time offset_ns + round(stamp * 1e9): take() hands runs of such messages over as pack_direct's blocks. A message the core does not pack goes as push() hands it.
        """
    def set_hand_over(self, stamp: typing.Any, packed_route: typing.Any, offset_ns: typing.SupportsInt | typing.SupportsIndex = 0) -> None:
        """
        What hand_over() calls for each message: stamp() (None: 0.0) and packed_route(topic) (None, or a route of None: push()), and the packed messages' log time offset.
        """
    def take(self, max: typing.SupportsInt | typing.SupportsIndex = 64, timeout: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> list:
        """
        Up to `max` waiting items: each pushed message as (topic, message, stamp), each run of packed ones as (None, routes, counts, data), oldest first, waiting up to `timeout` seconds (the GIL released) for the first.
        """
    def wait_ready(self, timeout: typing.SupportsFloat | typing.SupportsIndex = 0.0) -> bool:
        """
        Waits up to `timeout` seconds (the GIL released) until an item waits, without taking it: True when one does, False when the time ran out or the ring is closed and empty.
        """
    @property
    def capacity(self) -> int:
        ...
    @property
    def closed(self) -> bool:
        ...
    @property
    def dropped(self) -> int:
        ...
    @property
    def pushed(self) -> int:
        ...
    @property
    def waiting(self) -> int:
        ...
    @property
    def waits(self) -> int:
        ...
class CdrDecoder:
    """
    A ROS 2 type's little-endian CDR read into the bus's form (dicts, lists, numpy arrays): mjfast.interop.ros2.cdr.dict_decoder(ros_type) makes one from the type's rosbags msgdef.
    """
    def __init__(self, program: tuple) -> None:
        ...
    def decode(self, data: bytes) -> typing.Any:
        """
        The message of `data` (its encapsulation header first); ValueError for bytes it cannot read.
        """
class VectorHold:
    def __enter__(self) -> None:
        ...
    def __exit__(self, *args) -> None:
        ...
class VectorCore:
    def __init__(self, worlds: collections.abc.Sequence[EnvCore], threads: typing.SupportsInt | typing.SupportsIndex) -> None:
        """
        Own `threads` worker threads that step the bound EnvCores `worlds`.
        """
    def close(self) -> None:
        ...
    def failed_worlds(self) -> list[int]:
        """
        The worlds whose last step raised, in index order.
        """
    def gather(self, field: str) -> numpy.typing.NDArray[numpy.float64]:
        """
        A new (num_worlds, width) float64 array of `field` of every world.
        """
    def gather_rows(self, fields: collections.abc.Sequence[str], out: typing.Any = None) -> numpy.typing.NDArray[numpy.float64]:
        """
        Every world's `fields` side by side, one row per world: into `out` (a (num_worlds, total width) float64 array, filled in place), or a new array.
        """
    def hold(self, what: str) -> VectorHold:
        """
        A context manager holding the vector (no step runs meanwhile).
        """
    def step(self, n: typing.Any = 1, ctrl: typing.Any = None) -> None:
        """
        Write ctrl (num_worlds x nu) into every world, then step every world n steps on the pool; the first failed world's error is raised after all have returned.
        """
    @property
    def closed(self) -> bool:
        ...
    @property
    def num_worlds(self) -> int:
        ...
    @property
    def threads(self) -> int:
        ...
def checked_realtime_factor(realtime_factor: typing.Any) -> float | None:
    """
    realtime_factor as a float, or None; ValueError unless it is None or a positive finite number (the rule of EnvCore.start and EnvCore.set_realtime_factor).
    """
def control_hook_owned() -> bool:
    """
    Whether MuJoCo's mjcb_control holds mjfast's trampoline.
    """
def control_trampoline_address() -> int:
    ...
def failed_adapter(name: str, type: str, message: str, traceback: str = '') -> AdapterEntry:
    ...
def hooks_owned() -> bool:
    ...
def in_plugin_callback() -> bool:
    """
    True on a thread that is inside a plugin callback (step callbacks, reset/on_reset, update_read/write, load/init, activate, unload/cleanup).
    """
def interrupted_adapter(name: str, type: str, interrupt: typing.Any) -> AdapterEntry:
    """
    The factory entry of a plugin whose creation the user interrupted (KeyboardInterrupt, SystemExit): left unloaded, not failed; the interrupt is raised after the others load.
    """
def joint_state_cdr(packed: bytes) -> typing.Any:
    """
    The CDR (little-endian, with its encapsulation header) of the sensor_msgs/msg/JointState that conversions.joint_state makes of the bus message pack_message() packed, as rosbags serialises it; None for a message it does not take as that conversion would (the caller converts it then).
    """
def native_adapter(name: str, type: str, library_path: str, symbol: str, config_json: str, camera_opener: typing.Any = None, publisher: typing.Any = None, world_index: typing.SupportsInt | typing.SupportsIndex = 0) -> AdapterEntry:
    """
    Load a native plugin (dlopen, ABI check, instantiation); RuntimeError naming the library and the reason on failure. `camera_opener(name)` -> OffscreenCamera serves the plugin's open_offscreen_camera() during its load(); `publisher(topic, message)` its publish(); `world_index` is its world's in a VectorEnv (0 in a MujocoEnv).
    """
def pack_direct(items: list, direct: dict, offset_ns: typing.SupportsInt | typing.SupportsIndex) -> tuple[tuple, list]:
    """
    A writer's batch of [(topic, message, time)]: those whose topic `direct` maps to a route (ROS topic, type, convert) as one block, (routes, counts, data): the routes used, how many messages each, and a record per message in `data`, in order: the route's index (uint32), offset_ns + round(time * 1e9) (int64, never below 0), the size (uint32) and pack_message(message), native byte order, unpadded; the others (and any the core does not pack) as they came: (block, rest).
    """
def pack_message(message: typing.Any) -> bytes:
    """
    A bus message as bytes (None, bool, int, float, str, bytes, list, tuple, dict and numpy arrays of a numeric dtype); TypeError for anything else. unpack_message() is its inverse.
    """
def passive_hook_owned() -> bool:
    """
    Whether MuJoCo's mjcb_passive holds mjfast's trampoline.
    """
def passive_trampoline_address() -> int:
    ...
def python_adapter(name: str, type: str, instance: typing.Any, style: str, model: typing.Any, data: typing.Any, control_data: typing.Any, node: typing.Any, callbacks: collections.abc.Iterable, stateful: bool = False) -> AdapterEntry:
    ...
def refusal(kind: str, what: str, inside: str = '') -> str:
    """
    The message mjfast refuses `what` with inside the context `kind` (call_context.h).
    """
def unpack_message(packed: bytes) -> typing.Any:
    """
    pack_message()'s inverse (its arrays are new, writable copies); ValueError for bytes it did not make.
    """
CALLBACKS: tuple = (('control_callback', 'control_callback', None), ('passive_callback', 'passive_callback', None), ('render_callback', 'render_callback', None), ('last_stage_callback', 'last_stage_callback', None), ('on_geom_changed', 'on_geom_changed', None), ('reset', 'reset', 'on_reset'), ('pre_step', None, 'pre_step'), ('update_read', None, 'update_read'), ('update_write', None, 'update_write'))
CAMERA_KEYS: tuple = ('width', 'height', 'planes', 'rate_hz', 'max_geom')
CONTROL_COMMAND_FIELDS: tuple = ('ctrl', 'qfrc_applied', 'xfrc_applied')
CONTROL_STATE_FIELDS: tuple = ('time', 'qpos', 'qvel', 'act', 'qfrc_actuator', 'sensordata', 'ctrl')
LIFECYCLE: tuple = (('load', 'init'), ('unload', 'cleanup'), ('statistics', 'statistics'), ('activate', 'activate'), ('get_state', 'get_state'), ('set_state', 'set_state'))
MUJOCO_VERSION_BUILT: str = '4.0.0'
PLANES: tuple = ('rgb', 'depth', 'segmentation')
PLUGIN_ABI_VERSION: int = 1
TIMING_SAMPLE_INTERVAL: int = 64
