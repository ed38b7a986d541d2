"""The browser viewer (SPEC §22): a viser server showing a running env.

Owns the viser server and one thread of turns ("mjfast-web"). At up to `rate_hz` (30), while at
least one browser is connected, a turn holds stepping at a step boundary just long enough to copy
the configuration (qpos, mocap), time, step count, the geoms' size and colour, and to collect the
plugins' `render_callback` geometry into its own scene; stepping then goes on, and the turn
computes the geoms' poses in its own data (mj_kinematics on its own copy of the model) and sends
the ones that moved. So the page never reads `env.data` mid-step, and the physics thread waits only
for that copy, never for the network or a browser. With no browser connected a turn does nothing:
a closed tab costs nothing.

Each geom is one scene node, created once (again after a reload, or when set_geom_properties
changes its size or colour) and then moved by pose only. The panel's buttons are section 13's
calls (`pause`/`resume`, `step(1)`, `reset()`); the open offscreen cameras' latest frames are
peeked at (`take_recent`, which leaves a plugin's own `take_latest` untouched). It does not step the
env and does not own its lifetime; when the env closes, the server stops.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import math
import socket
import threading
import time
from typing import Any

import mujoco
import numpy as np
import trimesh
import viser

from mjfast._waiting import wait_interruptibly
from mjfast.errors import LogicError, MjfastError
from mjfast.view.web import scene as shapes
from mjfast.view.web.server import start_server, stop_server

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DEFAULT_RATE_HZ", "WebViewer", "launch_web_viewer"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080
DEFAULT_RATE_HZ = 30.0
PANEL_RATE_HZ = 10.0  # the panel's figures and the cameras' frames
IDLE_POLL_S = 0.5  # no browser: how often the thread looks at the env (is it closed?)
USER_SCENE_MAX_GEOM = 1000
_CLOSE_TIMEOUT_S = 10.0  # a turn in progress (a hold, a send) ends well within this
_POSE_TOLERANCE = 1e-7  # a geom that moved less than this is not sent again

_log = logging.getLogger("mjfast.web")


def _url(host: str, port: int) -> str:
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/"


@dataclasses.dataclass(slots=True)
class _Snapshot:
    """What a turn copies at a step boundary."""

    qpos: np.ndarray
    mocap_pos: np.ndarray
    mocap_quat: np.ndarray
    time: float
    step_count: int
    geom_rgba: np.ndarray
    geom_size: np.ndarray
    # The plugins' geoms: type, size, pos, mat, rgba each.
    user_geoms: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    reloaded: bool = False


class WebViewer:
    """The browser viewer on `env` (use `env.launch_web_viewer()`): `url`, `close()`,
    `is_running()`, `clients` (browsers connected now), `turns` (pose updates sent)."""

    def __init__(self, env: Any, *, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST,
                 rate_hz: float = DEFAULT_RATE_HZ) -> None:
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"port must be an integer from 0 to 65535, got {port!r}")
        if not isinstance(host, str) or not host:
            raise ValueError(f"host must be a non-empty string, got {host!r}")
        if (isinstance(rate_hz, bool) or not isinstance(rate_hz, (int, float))
                or not math.isfinite(rate_hz) or not rate_hz > 0):
            raise ValueError(f"rate_hz must be a positive number, got {rate_hz!r}")
        self._env = env
        self._period = 1.0 / float(rate_hz)
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._ended = threading.Event()
        self._close_lock = threading.Lock()
        self._server_stopped = False
        self.turns = 0
        self._model: mujoco.MjModel | None = None
        self._nodes: list[Any] = []
        self._shapes: list[shapes.GeomShape | None] = []
        self._user_nodes: list[tuple[tuple[Any, ...], Any]] = []
        self._camera_images: dict[str, tuple[Any, int]] = {}
        self._lights: list[Any] = []
        self._next_panel = 0.0

        server = start_server(host, port)
        self._server = server
        self._host, self._port = host, server.get_port()
        try:
            with env.hold_stepping("launch_web_viewer"):
                first = self._copy_model()
            server.scene.configure_default_lights(enabled=False, cast_shadow=False)
            server.scene.configure_environment_map(None)
            self._build_panel()
            self._apply_snapshot(first)  # builds the scene
        except BaseException:
            stop_server(server)
            raise
        server.on_client_connect(lambda _client: self._wake.set())
        self._thread = threading.Thread(target=self._run, name="mjfast-web", daemon=True)
        self._thread.start()

    # -- the handle ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The page's address (http://HOST:PORT/)."""
        return _url(self._host, self._port)

    @property
    def port(self) -> int:
        return self._port

    @property
    def clients(self) -> int:
        """How many browsers are connected now."""
        return len(self._server.get_clients())

    def is_running(self) -> bool:
        """True until `close()`, or until the env is closed."""
        return not self._ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until the viewer has ended; returns whether it has (Ctrl-C gets through)."""
        return wait_interruptibly(self._ended, timeout)

    def close(self) -> None:
        """Stops the server (the pages show it disconnected); idempotent. The env keeps going."""
        self._stop.set()
        self._wake.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(_CLOSE_TIMEOUT_S)
        self._shut_down()

    def __enter__(self) -> WebViewer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<mjfast.WebViewer {self.url} {'open' if self.is_running() else 'closed'}>"

    # -- the thread of turns -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            next_turn = time.monotonic()
            while not self._stop.is_set():
                if not self._server.get_clients():
                    # Nobody watching: no hold, no work; a connect wakes the thread at once.
                    self._wake.wait(IDLE_POLL_S)
                    self._wake.clear()
                    if self._env.closed:
                        break
                    next_turn = time.monotonic()
                    continue
                self._turn()
                next_turn += self._period
                now = time.monotonic()
                if next_turn < now:  # late (a long reload, a busy machine): no burst
                    next_turn = now
                self._stop.wait(next_turn - now)
        except LogicError:
            pass  # the env is closed
        except Exception:
            _log.exception("the web viewer stopped on an error")
        finally:
            self._ended.set()
            self._shut_down()

    def _shut_down(self) -> None:
        with self._close_lock:
            if not self._server_stopped:
                self._server_stopped = True
                stop_server(self._server)
        self._ended.set()

    def _turn(self) -> None:
        env = self._env
        with env.hold_stepping("web viewer"):
            snapshot = self._copy_state()
        self._apply_snapshot(snapshot)
        self.turns += 1

    # -- at the step boundary (stepping held): copies only -------------------------------------

    def _copy_model(self) -> _Snapshot:
        """At launch and after a reload: the viewer's own model and data."""
        env = self._env
        self._generation = env.model_generation
        self._model = copy.copy(env.model)
        self._data = mujoco.MjData(self._model)
        self._user_scene = mujoco.MjvScene(self._model, maxgeom=USER_SCENE_MAX_GEOM)
        snapshot = self._copy_state(check_generation=False)
        snapshot.reloaded = True
        return snapshot

    def _copy_state(self, check_generation: bool = True) -> _Snapshot:
        env = self._env
        if check_generation and env.model_generation != self._generation:
            return self._copy_model()
        data, model = env.data, env.model
        snapshot = _Snapshot(data.qpos.copy(), data.mocap_pos.copy(), data.mocap_quat.copy(),
                             float(data.time), env.step_count, model.geom_rgba.copy(),
                             model.geom_size.copy(), [])
        scene = self._user_scene
        scene.ngeom = 0
        try:
            env.host.dispatch_render(scene=scene)
        except MjfastError as error:
            # The host has marked the plugin failed; the others keep drawing.
            _log.warning("render_callback failed in the web viewer: %s", error)
        for index in range(scene.ngeom):
            geom = scene.geoms[index]
            snapshot.user_geoms.append((int(geom.type), np.array(geom.size), np.array(geom.pos),
                                        np.array(geom.mat), np.array(geom.rgba)))
        return snapshot

    # -- after the hold: the page ---------------------------------------------------------------

    def _apply_snapshot(self, snapshot: _Snapshot) -> None:
        model, data = self._model, self._data
        assert model is not None
        if snapshot.reloaded:
            self._build_scene()
        self._update_geom_properties(snapshot)
        data.qpos[:] = snapshot.qpos
        data.mocap_pos[:] = snapshot.mocap_pos
        data.mocap_quat[:] = snapshot.mocap_quat
        data.time = snapshot.time
        mujoco.mj_kinematics(model, data)  # this pair belongs to no env: no plugin sees it
        positions = data.geom_xpos.copy()
        quaternions = shapes.matrices_to_quaternions(data.geom_xmat)
        moved = ((np.abs(positions - self._sent_positions) > _POSE_TOLERANCE).any(axis=1)
                 | (np.abs(quaternions - self._sent_quaternions) > _POSE_TOLERANCE).any(axis=1))
        with self._server.atomic():  # one frame: every node of this turn moves together
            for geom_id in np.flatnonzero(moved):
                node = self._nodes[geom_id]
                if node is not None:
                    node.position = positions[geom_id]
                    node.wxyz = quaternions[geom_id]
            self._sent_positions[moved] = positions[moved]
            self._sent_quaternions[moved] = quaternions[moved]
            self._update_user_geoms(snapshot.user_geoms)
        now = time.monotonic()
        if now >= self._next_panel or snapshot.reloaded:
            self._next_panel = now + 1.0 / PANEL_RATE_HZ
            self._update_panel(snapshot)
            self._update_cameras()

    def _build_scene(self) -> None:
        """One node per drawn geom, at the model's initial pose; the first view."""
        model, server = self._model, self._server
        assert model is not None
        for node in self._nodes:
            if node is not None:
                node.remove()
        for _, node in self._user_nodes:
            node.remove()
        self._user_nodes = []
        self._shapes = shapes.model_geom_shapes(model)
        self._nodes = [None if shape is None else
                       _add_node(server, shapes.node_name(model, geom_id), shape)
                       for geom_id, shape in enumerate(self._shapes)]
        self._sent_positions = np.full((model.ngeom, 3), np.inf)
        self._sent_quaternions = np.full((model.ngeom, 4), np.inf)
        self._line_radius = 0.002 * max(float(model.stat.extent), 1e-3)
        camera = shapes.free_camera(model)
        server.initial_camera.position = tuple(camera.position)
        server.initial_camera.look_at = tuple(camera.look_at)
        server.initial_camera.up = (0.0, 0.0, 1.0)
        server.initial_camera.fov = camera.fov
        server.initial_camera.near = 0.01 * max(float(model.stat.extent), 1e-3)
        server.initial_camera.far = 100.0 * max(float(model.stat.extent), 1e-3)
        self._build_lights(camera)

    def _build_lights(self, camera: shapes.FreeCamera) -> None:
        """MuJoCo's lighting, without shadows: the headlight's ambient, its diffuse from the first
        view, and each active model light, as lights that cost a browser drawing in software
        (no GPU) next to nothing. viser's own lights (shadow-casting cascades) and environment
        map are off: in software WebGL they made every frame take a second or more."""
        model, data, scene = self._model, self._data, self._server.scene
        assert model is not None
        for light in self._lights:
            light.remove()
        mujoco.mj_kinematics(model, data)
        mujoco.mj_camlight(model, data)
        headlight = model.vis.headlight
        self._lights = [scene.add_light_ambient(
            "/mjfast/lights/ambient", **_light_colour(np.asarray(headlight.ambient)))]
        distance = max(float(model.stat.extent), 1e-3)
        directions = []  # (name, where the light comes from, diffuse colour)
        if headlight.active:
            directions.append(("head", camera.position - camera.look_at,
                               np.asarray(headlight.diffuse)))
        for light_id in range(model.nlight):
            if model.light_active[light_id]:
                directions.append((f"{light_id}", -np.asarray(data.light_xdir[light_id]),
                                   np.asarray(model.light_diffuse[light_id])))
        for name, towards, diffuse in directions:
            norm = float(np.linalg.norm(towards))
            if norm > 0:  # three.js lights from its position towards the origin
                self._lights.append(scene.add_light_directional(
                    f"/mjfast/lights/{name}", position=tuple(towards / norm * distance),
                    **_light_colour(diffuse)))

    def _update_geom_properties(self, snapshot: _Snapshot) -> None:
        """set_geom_properties changed a size or colour: that geom's node is made again."""
        model = self._model
        assert model is not None
        changed = ((snapshot.geom_rgba != model.geom_rgba).any(axis=1)
                   | (snapshot.geom_size != model.geom_size).any(axis=1))
        if not changed.any():
            return
        model.geom_rgba[:] = snapshot.geom_rgba
        model.geom_size[:] = snapshot.geom_size
        for geom_id in np.flatnonzero(changed):
            if self._nodes[geom_id] is not None:
                self._nodes[geom_id].remove()
            shape = shapes.geom_shape(model, int(geom_id))
            self._shapes[geom_id] = shape
            self._nodes[geom_id] = (None if shape is None else _add_node(
                self._server, shapes.node_name(model, int(geom_id)), shape))
            self._sent_positions[geom_id] = np.inf

    def _update_user_geoms(self, geoms: list[tuple[int, np.ndarray, np.ndarray, np.ndarray,
                                                   np.ndarray]]) -> None:
        """The plugins' geoms of this turn: node k is the k-th drawn geom; moved when its shape
        is the same as last turn's, made again when not."""
        drawn = []
        for geom_type, size, pos, mat, rgba in geoms:
            shape = shapes.user_geom_shape(geom_type, size, rgba, self._line_radius)
            if shape is not None:
                drawn.append((shape, pos, mat))
        for index, (shape, pos, mat) in enumerate(drawn):
            position, quaternion = shapes.user_geom_pose(shape, pos, mat)
            signature = shape.signature()
            if index < len(self._user_nodes) and self._user_nodes[index][0] == signature:
                node = self._user_nodes[index][1]
                node.position = position
                node.wxyz = quaternion
                continue
            node = _add_node(self._server, f"/mjfast/plugins/{index}", shape, position,
                             quaternion)
            if index < len(self._user_nodes):
                self._user_nodes[index] = (signature, node)  # the same name replaces the node
            else:
                self._user_nodes.append((signature, node))
        for _, node in self._user_nodes[len(drawn):]:
            node.remove()
        del self._user_nodes[len(drawn):]

    # -- the panel -----------------------------------------------------------------------------

    def _build_panel(self) -> None:
        gui = self._server.gui
        self._time_field = gui.add_text("time", initial_value="0.000 s", disabled=True)
        self._steps_field = gui.add_text("steps", initial_value="0", disabled=True)
        self._rtf_field = gui.add_text("real-time factor", initial_value="-", disabled=True)
        self._paused_field = gui.add_text("paused", initial_value="no", disabled=True)
        self._pause_button = gui.add_button("Pause")
        self._step_button = gui.add_button("Step")
        self._reset_button = gui.add_button("Reset")
        self._pause_button.on_click(lambda _event: self._call("pause/resume", self._pause))
        self._step_button.on_click(lambda _event: self._call("step", lambda: self._env.step(1)))
        self._reset_button.on_click(lambda _event: self._call("reset", self._env.reset))
        self._cameras_folder = gui.add_folder("cameras")

    def _pause(self) -> None:
        env = self._env
        if env.paused:
            env.resume()
        else:
            env.pause()
        self._show_paused(env.paused, env.running)

    def _call(self, what: str, action: Any) -> None:
        """A button's section 13 call, on viser's callback thread; a failure is shown, not fatal."""
        try:
            action()
        except Exception as error:
            _log.warning("web viewer %s: %s: %s", what, type(error).__name__, error)
            for client in self._server.get_clients().values():
                with contextlib.suppress(Exception):  # a tab closing meanwhile
                    client.add_notification(f"{what} failed", f"{type(error).__name__}: "
                                            f"{error}", color="red", auto_close_seconds=5.0)
        self._wake.set()

    def _show_paused(self, paused: bool, running: bool) -> None:
        self._pause_button.label = "Resume" if paused else "Pause"
        self._paused_field.value = "yes" if paused else "no"
        # One step at a time: while paused, or when no physics thread runs.
        self._step_button.disabled = running and not paused

    def _update_panel(self, snapshot: _Snapshot) -> None:
        env = self._env
        self._time_field.value = f"{snapshot.time:.3f} s"
        self._steps_field.value = str(snapshot.step_count)
        rtf = env.measured_realtime_factor
        self._rtf_field.value = f"{rtf:.2f}x" if math.isfinite(rtf) else "-"
        self._show_paused(env.paused, env.running)

    def _update_cameras(self) -> None:
        """The latest frame of each open offscreen camera with frames enabled."""
        shown: set[str] = set()
        for handle in self._env.offscreen_cameras:
            name = handle.name
            if name in shown:
                continue
            try:
                frames = handle.take_recent("rgb", 1)
            except Exception:  # frames not enabled, no rgb plane, reloading, closed
                continue
            if not frames:
                continue
            shown.add(name)
            lease = frames[-1]
            try:
                capture = int(lease.capture_id)
                image, last = self._camera_images.get(name, (None, -1))
                if capture == last:
                    continue
                pixels = np.array(lease.data, copy=True)
            finally:
                lease.release()
            if image is None:
                with self._cameras_folder:
                    image = self._server.gui.add_image(pixels, label=name, format="jpeg")
            else:
                image.image = pixels
            self._camera_images[name] = (image, capture)
        for name in set(self._camera_images) - shown:  # closed (or reloading): taken away
            self._camera_images.pop(name)[0].remove()


def _add_node(server: viser.ViserServer, name: str, shape: shapes.GeomShape,
              position: np.ndarray | None = None, wxyz: np.ndarray | None = None) -> Any:
    pose: dict[str, Any] = {}
    if position is not None:
        pose["position"] = tuple(float(v) for v in position)
    if wxyz is not None:
        pose["wxyz"] = tuple(float(v) for v in wxyz)
    scene = server.scene
    if shape.kind == "box":
        return scene.add_box(name, color=shape.rgb, dimensions=2 * np.asarray(shape.size[:3]),
                             opacity=shape.opacity, **pose)
    if shape.kind == "sphere":
        return scene.add_icosphere(name, radius=shape.size[0], color=shape.rgb, subdivisions=3,
                                   opacity=shape.opacity, **pose)
    if shape.kind == "cylinder":
        return scene.add_cylinder(name, radius=shape.size[0], height=2 * shape.size[1],
                                  color=shape.rgb, opacity=shape.opacity, **pose)
    assert shape.vertices is not None and shape.faces is not None
    if shape.texture is not None:
        return scene.add_mesh_trimesh(name, _textured_mesh(shape), **pose)
    return scene.add_mesh_simple(name, shape.vertices, shape.faces, color=shape.rgb,
                                 opacity=shape.opacity,
                                 side="double" if shape.double_sided else "front", **pose)


def _light_colour(rgb: np.ndarray) -> dict[str, Any]:
    """A MuJoCo light colour (0-1 per channel, fixed-function) as a three.js light's colour and
    intensity (physically based: a Lambertian surface reflects 1/pi of it)."""
    strongest = float(np.max(rgb))
    if strongest <= 0:
        return {"color": (0, 0, 0), "intensity": 0.0}
    colour = tuple(round(float(c) / strongest * 255) for c in rgb[:3])
    return {"color": colour, "intensity": math.pi * strongest}


def _textured_mesh(shape: shapes.GeomShape) -> trimesh.Trimesh:
    """A textured shape as a trimesh mesh (viser sends it as a GLB): the image repeats and
    multiplies the geom's colour, unlit parts of it as dull as MuJoCo's (no metal, rough)."""
    import PIL.Image  # viser's dependency, as trimesh is

    assert shape.texture is not None and shape.uv is not None
    image = PIL.Image.fromarray(shape.texture)
    alpha = 255 if shape.opacity is None else round(shape.opacity * 255)
    material = trimesh.visual.material.PBRMaterial(
        baseColorTexture=image, baseColorFactor=[*shape.rgb, alpha], metallicFactor=0.0,
        roughnessFactor=1.0, doubleSided=shape.double_sided,
        alphaMode=None if shape.opacity is None else "BLEND")
    return trimesh.Trimesh(shape.vertices, shape.faces, process=False,
                           visual=trimesh.visual.TextureVisuals(uv=shape.uv, material=material))


def launch_web_viewer(env: Any, *, port: int = DEFAULT_PORT, host: str = DEFAULT_HOST,
                      rate_hz: float = DEFAULT_RATE_HZ) -> WebViewer:
    """Serves the browser viewer of `env` on http://host:port/ (see `WebViewer`)."""
    return WebViewer(env, port=port, host=host, rate_hz=rate_hz)
