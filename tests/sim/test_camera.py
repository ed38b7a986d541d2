"""Offscreen camera handles (SPEC §10): each sentence of the contract, and frames that match
mujoco.Renderer."""

from __future__ import annotations

import gc
import os

os.environ.setdefault("MUJOCO_GL", "egl")  # before anything imports mujoco's renderer

import threading
from typing import Any, ClassVar

import mujoco
import numpy as np
import pytest

import mjfast
from mjfast._core_loader import _core
from mjfast.bus.params import ParameterServer
from mjfast.sim.camera import CAMERA_KEYS, PLANES, camera_config
from support import CAMERA_HEIGHT, CAMERA_UNAVAILABLE, CAMERA_WIDTH, CAMERA_XML, TESTS_DIR, wait_for

UNAVAILABLE = CAMERA_UNAVAILABLE
WIDTH, HEIGHT = CAMERA_WIDTH, CAMERA_HEIGHT
XML = CAMERA_XML
# The same world without the "side" camera.
XML_NO_SIDE = XML.replace('<camera name="side" pos="2 0 1" xyaxes="0 1 0 -0.5 0 1"/>', "")


def camera_params(**cameras: dict[str, Any]) -> dict[str, Any]:
    return {"mujoco_server": {"cameras": cameras}}


def register(name: str, cls: type) -> str:
    plugin_type = f"test_camera/{name}"
    mjfast.register_plugin(plugin_type, cls)
    return plugin_type


def with_plugin(plugin_type: str, params: dict[str, Any] | None = None,
                config: dict[str, Any] | None = None) -> dict[str, Any]:
    params = dict(params or {"mujoco_server": {}})
    server = dict(params["mujoco_server"])
    server["MujocoPlugins"] = [{"name": "p", "type": plugin_type, **(config or {})}]
    params["mujoco_server"] = server
    return params


def reference(model: mujoco.MjModel, data: mujoco.MjData, camera: str, mode: str = "rgb",
              option: mujoco.MjvOption | None = None) -> np.ndarray:
    with mujoco.Renderer(model, HEIGHT, WIDTH) as renderer:
        if mode == "depth":
            renderer.enable_depth_rendering()
        elif mode == "segmentation":
            renderer.enable_segmentation_rendering()
        renderer.update_scene(data, camera, scene_option=option)
        return renderer.render()


def data_after(model: mujoco.MjModel, steps: int) -> mujoco.MjData:
    data = mujoco.MjData(model)
    for _ in range(steps):
        mujoco.mj_step(model, data)
    return data


@pytest.fixture
def env():
    with mjfast.MujocoEnv(XML, render_sync=True) as created:
        yield created


# -- opening -----------------------------------------------------------------------------------


def test_unknown_camera_is_a_key_error_naming_it_and_listing_the_cameras(env):
    with pytest.raises(KeyError) as raised:
        env.open_offscreen_camera("top")
    message = str(raised.value)
    assert "'top'" in message and "front" in message and "side" in message


def test_handles_are_independent(env):
    first = env.open_offscreen_camera("front")
    second = env.open_offscreen_camera("front")
    first.set_geom_group(2, False)
    assert not first.geom_group_enabled(2)
    assert second.geom_group_enabled(2)
    second.enable_frames()  # enabling one handle does not enable the other
    with pytest.raises(mjfast.LogicError):
        first.take_latest()


def test_the_env_lists_the_handles_someone_holds(env):
    # What the browser viewer shows the frames of (SPEC §22).
    assert env.offscreen_cameras == ()
    first = env.open_offscreen_camera("front")
    second = env.open_offscreen_camera("side")
    assert sorted(id(handle) for handle in env.offscreen_cameras) == sorted([id(first),
                                                                             id(second)])
    del second
    gc.collect()
    assert len(env.offscreen_cameras) == 1 and env.offscreen_cameras[0] is first


class OpensFromStep(mjfast.MujocoPlugin):
    errors: ClassVar[list[BaseException]] = []

    def load(self, model, data):
        return True

    def last_stage_callback(self, model, data):
        try:
            self.env.open_offscreen_camera("front")
        except BaseException as error:  # recorded for the test
            OpensFromStep.errors.append(error)


def test_opening_from_a_step_callback_is_a_logic_error():
    OpensFromStep.errors.clear()
    with mjfast.MujocoEnv(XML, params=with_plugin(register("opens", OpensFromStep))) as env:
        env.step(1)
    assert len(OpensFromStep.errors) == 1
    assert isinstance(OpensFromStep.errors[0], mjfast.LogicError)


def test_take_latest_before_enable_frames_is_a_logic_error(env):
    camera = env.open_offscreen_camera("front")
    with pytest.raises(mjfast.LogicError):
        camera.take_latest()
    with pytest.raises(mjfast.LogicError):
        camera.take_recent("rgb", 1)


def test_enable_frames_twice_is_a_logic_error(env):
    camera = env.open_offscreen_camera("front")
    camera.enable_frames()
    with pytest.raises(mjfast.LogicError):
        camera.enable_frames()


def test_setters_validate_their_arguments(env):
    camera = env.open_offscreen_camera("front")
    with pytest.raises(ValueError):
        camera.set_geom_group(mujoco.mjNGROUP, False)
    with pytest.raises(ValueError):
        camera.set_visual_flag(len(mujoco.MjvOption().flags), True)
    with pytest.raises(ValueError):
        camera.enable_frames(history=0)
    with pytest.raises(ValueError):
        camera.plane_configured("infrared")


# -- load and reload: queued settings, unavailability, rebinding ----------------------------


class OpensInLoad(mjfast.MujocoPlugin):
    """Opens "front" in load and records what each call did while the load was in progress."""

    observed: ClassVar[dict[str, Any]] = {}
    camera: Any = None

    def load(self, model, data):
        camera = self.env.open_offscreen_camera("front")
        OpensInLoad.camera = camera
        seen = OpensInLoad.observed
        camera.set_geom_group(2, False)
        camera.set_geom_group(2, True)
        camera.set_geom_group(1, False)
        camera.set_visual_flag(mujoco.mjtVisFlag.mjVIS_INERTIA, True)
        camera.set_visual_flag(int(mujoco.mjtVisFlag.mjVIS_INERTIA), False)
        camera.set_visual_flag(mujoco.mjtVisFlag.mjVIS_COM, True)
        camera.enable_frames(history=2)
        for method, call in (
            ("geom_group_enabled", lambda: camera.geom_group_enabled(2)),
            ("visual_flag_enabled", lambda: camera.visual_flag_enabled(1)),
            ("take_latest", camera.take_latest),
        ):
            try:
                call()
                seen[method] = None
            except Exception as error:
                seen[method] = error
        try:
            camera.enable_frames()
        except Exception as error:
            seen["enable_frames_again"] = error
        return True


def test_setter_calls_during_load_are_applied_in_call_order():
    OpensInLoad.observed.clear()
    with mjfast.MujocoEnv(XML, params=with_plugin(register("opens_in_load", OpensInLoad)),
                          render_sync=True) as env:
        camera = OpensInLoad.camera
        assert camera.geom_group_enabled(2)  # False then True
        assert not camera.geom_group_enabled(1)
        assert not camera.visual_flag_enabled(mujoco.mjtVisFlag.mjVIS_INERTIA)
        assert camera.visual_flag_enabled(mujoco.mjtVisFlag.mjVIS_COM)
        env.step(1)
        assert camera.take_latest() is not None  # the queued enable_frames took effect


def test_reads_during_load_raise_camera_unavailable_with_the_exact_message():
    OpensInLoad.observed.clear()
    with mjfast.MujocoEnv(XML, params=with_plugin(register("opens_in_load", OpensInLoad))):
        pass
    for method in ("geom_group_enabled", "visual_flag_enabled", "take_latest"):
        error = OpensInLoad.observed[method]
        assert type(error) is mjfast.CameraUnavailableError, method
        assert isinstance(error, RuntimeError)
        assert str(error) == UNAVAILABLE
    assert isinstance(OpensInLoad.observed["enable_frames_again"], mjfast.LogicError)


class ProbesUserHandle(mjfast.MujocoPlugin):
    """In load, uses a handle that user code opened before a reload."""

    handle: Any = None
    observed: ClassVar[dict[str, Any]] = {}

    def load(self, model, data):
        handle = ProbesUserHandle.handle
        if handle is None:
            return True
        seen = ProbesUserHandle.observed
        handle.set_geom_group(0, False)  # queued
        handle.set_geom_group(0, True)   # queued, after the one above
        handle.set_geom_group(3, False)  # queued
        for method, call in (
            ("geom_group_enabled", lambda: handle.geom_group_enabled(0)),
            ("visual_flag_enabled", lambda: handle.visual_flag_enabled(0)),
            ("take_latest", handle.take_latest),
        ):
            try:
                call()
                seen[method] = None
            except Exception as error:
                seen[method] = error
        return True


def test_during_reload_reads_raise_and_setters_queue_then_the_handle_rebinds():
    ProbesUserHandle.handle = None
    ProbesUserHandle.observed.clear()
    params = with_plugin(register("probes", ProbesUserHandle))
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.set_geom_group(2, False)
        camera.enable_frames()
        env.step(1)
        before = camera.take_latest()
        assert before.frame_generation == env.model_generation
        ProbesUserHandle.handle = camera
        env.reload()
        for method in ("geom_group_enabled", "visual_flag_enabled", "take_latest"):
            error = ProbesUserHandle.observed[method]
            assert type(error) is mjfast.CameraUnavailableError, method
            assert str(error) == UNAVAILABLE
        # Rebound by name, with its own settings kept and the queued ones applied in order.
        assert camera.geom_group_enabled(0)
        assert not camera.geom_group_enabled(2)
        assert not camera.geom_group_enabled(3)
        assert camera.take_latest() is None  # nothing rendered since the reload
        env.step(1)
        after = camera.take_latest()
        assert after is not None
        assert after.frame_generation == env.model_generation > before.frame_generation
        assert after.capture_id > before.capture_id
        ProbesUserHandle.handle = None


ALL_CALLS = (
    ("set_geom_group", (0, True)),
    ("set_visual_flag", (mujoco.mjtVisFlag.mjVIS_COM, True)),
    ("enable_frames", ()),
    ("geom_group_enabled", (0,)),
    ("visual_flag_enabled", (0,)),
    ("take_latest", ()),
    ("take_recent", ("rgb", 1)),
    ("plane_configured", ("rgb",)),
)


def assert_every_call_unavailable(camera: Any) -> None:
    for method, arguments in ALL_CALLS:
        with pytest.raises(mjfast.CameraUnavailableError) as raised:
            getattr(camera, method)(*arguments)
        assert str(raised.value) == UNAVAILABLE, method


def test_every_call_raises_while_retirement_is_pending(env):
    camera = env.open_offscreen_camera("front")
    camera.enable_frames()
    env._cameras.render_core.retire()  # the first stage of a reload, on its own
    assert_every_call_unavailable(camera)


def test_every_call_raises_after_close():
    env = mjfast.MujocoEnv(XML, render_sync=True)
    camera = env.open_offscreen_camera("front")
    camera.enable_frames()
    env.step(1)
    lease = camera.take_latest()
    env.close()
    assert_every_call_unavailable(camera)
    assert lease.data.shape == (HEIGHT, WIDTH, 3)  # a lease outlives its camera


def test_a_missing_camera_after_reload_is_a_key_error_after_the_new_generation_is_up():
    ProbesUserHandle.handle = None
    params = with_plugin(register("probes", ProbesUserHandle))
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        front = env.open_offscreen_camera("front")
        side = env.open_offscreen_camera("side")
        side.enable_frames()
        generation = env.model_generation
        with pytest.raises(KeyError) as raised:
            env.reload(XML_NO_SIDE)
        assert "'side'" in str(raised.value)
        assert env.model_generation == generation + 1
        assert [plugin.state for plugin in env.plugins] == [mjfast.PluginState.ACTIVE]
        assert front.geom_group_enabled(0)  # the others rebound
        assert_every_call_unavailable(side)
        env.step(1)  # the env runs on


# -- frames ------------------------------------------------------------------------------------


def test_frames_match_mujoco_renderer_in_every_plane():
    params = camera_params(front={"planes": ["rgb", "depth", "segmentation"]})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(30)  # the box is in the air, falling
        steps_at_capture = 18  # 30 Hz, 2 ms steps: captures after step 1 and once 35.3 ms passed
        expected = data_after(env.model, steps_at_capture)
        for plane, dtype, shape in (("rgb", np.uint8, (HEIGHT, WIDTH, 3)),
                                    ("depth", np.float32, (HEIGHT, WIDTH)),
                                    ("segmentation", np.int32, (HEIGHT, WIDTH, 2))):
            with camera.take_latest(plane) as lease:
                assert lease.plane == plane
                assert lease.data.dtype == dtype and lease.data.shape == shape
                assert (lease.width, lease.height) == (WIDTH, HEIGHT)
                assert lease.simulation_time_ns == round(expected.time * 1e9)
                np.testing.assert_array_equal(
                    lease.data, reference(env.model, expected, "front", plane))


def test_depth_is_in_metres_and_segmentation_names_the_geoms():
    params = camera_params(front={"planes": ["depth", "segmentation"]})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(1)
        depth = camera.take_latest("depth").data
        segmentation = camera.take_latest("segmentation").data
        box = mujoco.mj_name2id(env.model, mujoco.mjtObj.mjOBJ_GEOM, "box")
        on_box = (segmentation[..., 0] == box) & (segmentation[..., 1] == mujoco.mjtObj.mjOBJ_GEOM)
        assert on_box.any()
        # The camera is 2 m in front of the box's centre; its front face is 0.2 m closer.
        assert 1.5 < float(np.median(depth[on_box])) < 2.0
        assert not camera.plane_configured("rgb")
        with pytest.raises(ValueError):
            camera.take_latest("rgb")


def test_lease_is_a_read_only_view_and_refuses_use_after_release(env):
    camera = env.open_offscreen_camera("front")
    camera.enable_frames()
    env.step(1)
    lease = camera.take_latest()
    with pytest.raises(ValueError):
        lease.data[0, 0, 0] = 7
    assert lease.data is lease.data  # one view, no copy per access
    lease.release()
    assert lease.released
    with pytest.raises(mjfast.LogicError):
        _ = lease.data
    assert lease.capture_id >= 1  # metadata stays readable


class TakesInLastStage(mjfast.MujocoPlugin):
    seen: ClassVar[list[tuple[int, int | None, int | None]]] = []

    def load(self, model, data):
        self.camera = self.env.open_offscreen_camera("front")
        self.camera.enable_frames()
        return True

    def last_stage_callback(self, model, data):
        lease = self.camera.take_latest()
        if lease is None:
            TakesInLastStage.seen.append((round(data.time * 1e9), None, None))
        else:
            with lease:
                TakesInLastStage.seen.append(
                    (round(data.time * 1e9), lease.simulation_time_ns, lease.capture_id))


def test_take_latest_in_last_stage_returns_the_previous_completed_frame_once():
    TakesInLastStage.seen.clear()
    params = with_plugin(register("takes", TakesInLastStage),
                         camera_params(front={"rate_hz": 500.0}))  # a frame every 2 ms step
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        env.step(6)
        timestep_ns = round(env.model.opt.timestep * 1e9)
    seen = TakesInLastStage.seen
    assert seen[0][1] is None  # nothing rendered before the first step's render turn
    for now_ns, frame_ns, _ in seen[1:]:
        assert frame_ns == now_ns - timestep_ns  # the state the previous step left
    captures = [capture for _, _, capture in seen if capture is not None]
    assert len(captures) == 5 and captures == sorted(set(captures))


def test_take_latest_never_returns_the_same_frame_twice_at_30_hz():
    TakesInLastStage.seen.clear()
    with mjfast.MujocoEnv(XML, params=with_plugin(register("takes", TakesInLastStage)),
                          render_sync=True) as env:
        env.step(60)
    captures = [capture for _, _, capture in TakesInLastStage.seen if capture is not None]
    assert 3 <= len(captures) <= 5  # 0.12 s at 30 Hz
    assert len(captures) == len(set(captures))


def test_a_held_lease_keeps_its_pixels_while_newer_frames_are_rendered():
    params = camera_params(front={"rate_hz": 500.0})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(1)
        held = camera.take_latest()
        pixels = held.data.copy()
        for _ in range(40):  # the box falls: every newer frame differs
            env.step(5)
            newer = camera.take_latest()
            assert newer is not None
            newer.release()
        assert not np.array_equal(newer_pixels := camera.take_recent("rgb", 1)[0].data, pixels)
        assert newer_pixels.shape == pixels.shape
        np.testing.assert_array_equal(held.data, pixels)


def test_take_recent_returns_the_history_oldest_first():
    params = camera_params(front={"rate_hz": 500.0})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames(history=3)
        env.step(5)
        recent = camera.take_recent("rgb", 10)
        assert [lease.simulation_time_ns for lease in recent] == [6_000_000, 8_000_000,
                                                                  10_000_000]


def test_a_full_frame_store_drops_new_frames_and_counts_them():
    params = camera_params(front={"rate_hz": 500.0})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames(history=1)  # two slots: the kept frame and the one being rendered
        held = []
        for _ in range(2):
            env.step(1)
            held.append(camera.take_latest())  # both slots leased
        pixels = [lease.data.copy() for lease in held]
        env.step(3)
        assert camera.statistics()["frames_dropped"] == 3
        assert env.statistics()["render"]["frames_dropped"] == 3
        assert camera.take_latest() is None  # nothing newer than held[1] was stored
        for lease, copy in zip(held, pixels, strict=True):
            np.testing.assert_array_equal(lease.data, copy)
            lease.release()
        env.step(1)
        assert camera.take_latest().simulation_time_ns == 12_000_000


def test_geom_groups_and_visual_flags_change_what_is_rendered(env):
    camera = env.open_offscreen_camera("front")
    camera.set_geom_group(2, False)  # the box
    camera.set_visual_flag(mujoco.mjtVisFlag.mjVIS_INERTIA, True)
    camera.enable_frames()
    env.step(1)
    frame = camera.take_latest().data
    option = mujoco.MjvOption()
    option.geomgroup[2] = 0
    option.flags[mujoco.mjtVisFlag.mjVIS_INERTIA] = 1
    expected_state = data_after(env.model, 1)
    np.testing.assert_array_equal(frame, reference(env.model, expected_state, "front",
                                                   option=option))
    assert not np.array_equal(frame, reference(env.model, expected_state, "front"))
    red = (frame[..., 0] > 150) & (frame[..., 1] < 60) & (frame[..., 2] < 60)
    assert not red.any()  # the red box is hidden


class DrawsMarker(mjfast.MujocoPlugin):
    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        assert isinstance(scene, mujoco.MjvScene)
        geom = scene.geoms[scene.ngeom]
        mujoco.mjv_initGeom(geom, mujoco.mjtGeom.mjGEOM_SPHERE, np.array([0.15, 0, 0]),
                            np.array([0.0, -1.0, 0.6]), np.eye(3).flatten(),
                            np.array([0.0, 1.0, 0.0, 1.0], dtype=np.float32))
        scene.ngeom += 1


def test_render_callback_geometry_appears_in_the_frame():
    params = with_plugin(register("marker", DrawsMarker))
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.step(1)
        frame = camera.take_latest().data
    pixels = frame.astype(int)
    green = (pixels[..., 1] > pixels[..., 0] + 60) & (pixels[..., 1] > pixels[..., 2] + 60)
    assert green.sum() > 50
    plain = reference(mujoco.MjModel.from_xml_string(XML), data_after(
        mujoco.MjModel.from_xml_string(XML), 1), "front")
    plain = plain.astype(int)
    assert not ((plain[..., 1] > plain[..., 0] + 60) & (plain[..., 1] > plain[..., 2] + 60)).any()


class Overflows(mjfast.MujocoPlugin):
    def load(self, model, data):
        return True

    def render_callback(self, model, data, scene):
        scene.ngeom = scene.maxgeom + 1


def test_render_callback_geometry_beyond_max_geom_is_an_error():
    params = with_plugin(register("overflows", Overflows))
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        with pytest.raises(ValueError, match="max_geom"):
            env.step(1)
        assert camera.take_latest() is None


def test_a_model_bigger_than_max_geom_is_an_error_not_a_truncation(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo logs its own overflow warning to MUJOCO_LOG.TXT
    params = camera_params(front={"max_geom": 1})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        with pytest.raises(ValueError, match="max_geom"):
            env.step(1)


# -- parameters --------------------------------------------------------------------------------


def test_camera_parameters_come_from_the_parameter_server():
    params = camera_params(side={"width": 32, "height": 24, "planes": ["depth"],
                                 "rate_hz": 100.0})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        side = env.open_offscreen_camera("side")
        front = env.open_offscreen_camera("front")
        assert (side.width, side.height, side.rate_hz) == (32, 24, 100.0)
        assert side.plane_configured("depth") and not side.plane_configured("rgb")
        assert (front.width, front.height, front.rate_hz) == (WIDTH, HEIGHT, 30.0)
        assert front.plane_configured("rgb") and not front.plane_configured("depth")
        side.enable_frames()
        env.step(10)
        assert side.take_latest("depth").data.shape == (24, 32)
        assert side.statistics()["captures"] == 2  # every 10 ms over 20 ms


@pytest.mark.parametrize("bad", [{"planes": ["thermal"]}, {"width": 0}, {"rate_hz": -1},
                                 {"fov": 60}])
def test_bad_camera_parameters_are_config_errors(bad):
    with mjfast.MujocoEnv(XML, params=camera_params(front=bad)) as env, \
            pytest.raises(mjfast.ConfigError):
        env.open_offscreen_camera("front")


# -- stepping modes ----------------------------------------------------------------------------


def test_frames_arrive_while_the_physics_thread_runs():
    params = camera_params(front={"rate_hz": 200.0})
    with mjfast.MujocoEnv(XML, params=params) as env:
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        env.start(realtime_factor=None)
        arrived = wait_for(lambda: camera.statistics()["frames_rendered"] >= 3, timeout=30)
        lease = camera.take_latest()
        env.stop()
        assert arrived, camera.statistics()
        assert lease is not None and lease.capture_id >= 3  # the newest of those frames


def test_frames_continue_after_a_reset(env):
    camera = env.open_offscreen_camera("front")
    camera.enable_frames()
    env.step(50)
    assert camera.take_latest() is not None
    env.reset()
    env.step(1)
    lease = camera.take_latest()
    assert lease is not None and lease.simulation_time_ns == 2_000_000


def test_request_frame_makes_one_capture_due_at_the_next_steps_end():
    # A camera whose rate never makes it due (gym's render camera): only requested frames come.
    params = camera_params(front={"rate_hz": 1e-9}, side={"rate_hz": 1e-9})
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        front, side = env.open_offscreen_camera("front"), env.open_offscreen_camera("side")
        front.enable_frames()
        side.enable_frames()
        env.step(1)  # the first frames, due when frames were enabled
        assert front.take_latest().simulation_time_ns == 2_000_000
        assert side.take_latest().simulation_time_ns == 2_000_000
        env.step(5)
        assert front.take_latest() is None  # not due again on its own
        front.request_frame()
        env.step(3)
        with front.take_latest() as lease:  # the end of the first step after the request
            assert lease.simulation_time_ns == 14_000_000
            np.testing.assert_array_equal(
                lease.data, reference(env.model, data_after(env.model, 7), "front"))
        assert side.take_latest() is None  # only the camera asked
        assert front.take_latest() is None  # one frame per request


def test_request_frame_needs_frames_enabled_and_a_usable_handle(env):
    camera = env.open_offscreen_camera("front")
    with pytest.raises(mjfast.LogicError, match=r"request_frame\(\) before enable_frames\(\) on "
                       r"the handle of camera 'front'"):
        camera.request_frame()
    camera.enable_frames()
    env.close()
    with pytest.raises(mjfast.CameraUnavailableError):
        camera.request_frame()


def test_close_while_a_turn_is_in_flight():
    for running in (False, True):
        env = mjfast.MujocoEnv(XML, params=camera_params(front={"rate_hz": 1000.0}))
        camera = env.open_offscreen_camera("front")
        camera.enable_frames()
        if running:
            env.start(realtime_factor=None)
            # Rendering under way: the render thread has finished a turn and takes the next.
            assert wait_for(lambda env=env: env.statistics()["render"]["turns"] >= 1, timeout=20)
        else:
            env.step(20)
        closer = threading.Thread(target=env.close)
        closer.start()
        closer.join(timeout=20)
        assert not closer.is_alive()
        assert_every_call_unavailable(camera)


# -- the shipped publisher and the recording example ------------------------------------------


def test_camera_publisher_publishes_each_cameras_frames_at_its_rate():
    params = camera_params(front={"rate_hz": 100.0, "planes": ["rgb", "depth"]})
    params["mujoco_server"]["MujocoPlugins"] = [
        {"name": "cams", "type": "mjfast/CameraPublisher", "cameras": ["front"]}]
    received: list[dict[str, Any]] = []
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        env.bus.subscribe("/mujoco_server/cams/front/rgb", received.append)
        env.step(50)  # 0.1 s at 100 Hz
        depth = env.bus.latest("/mujoco_server/cams/front/depth")
    assert 9 <= len(received) <= 10
    assert [m["capture_id"] for m in received] == sorted({m["capture_id"] for m in received})
    assert received[-1]["data"].shape == (HEIGHT, WIDTH, 3)
    assert depth["data"].dtype == np.float32
    assert received[0]["simulation_time_ns"] == 2_000_000


def test_record_example_writes_valid_pngs(tmp_path):
    import importlib.util
    import zlib

    path = str(TESTS_DIR.parent / "examples" / "record_camera.py")
    spec = importlib.util.spec_from_file_location("record_camera", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--frames", "2", "--out", str(tmp_path), "--width", "32",
                        "--height", "24"]) == 0
    files = sorted(tmp_path.glob("*.png"))
    assert len(files) == 2
    blob = files[0].read_bytes()
    assert blob.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(blob[16:20], "big"), int.from_bytes(blob[20:24], "big")
    assert (width, height) == (32, 24)
    start = blob.index(b"IDAT") + 4
    length = int.from_bytes(blob[start - 8:start - 4], "big")
    assert len(zlib.decompress(blob[start:start + length])) == 24 * (1 + 32 * 3)


def test_a_reload_with_bad_camera_parameters_changes_nothing():
    with mjfast.MujocoEnv(XML, render_sync=True) as env:
        front = env.open_offscreen_camera("front")
        front.enable_frames()
        generation = env.model_generation
        env.params.set("/mujoco_server/cameras/front/width", -5)
        with pytest.raises(mjfast.ConfigError, match="width"):
            env.reload()
        assert env.model_generation == generation
        assert front.geom_group_enabled(0)  # still live, not stuck in a reload
        env.step(1)
        with front.take_latest() as frame:
            assert frame.width == WIDTH


# -- unnamed cameras ------------------------------------------------------------------------------

# The camera world with a third camera that has no name: id 2, opened as `camera_2`.
XML_UNNAMED = XML.replace('<camera name="side"', '<camera pos="0 2 1" xyaxes="-1 0 0 0 0.5 1"/>'
                                                  '<camera name="side"')


def test_an_unnamed_camera_opens_as_camera_and_its_id_and_renders_that_camera():
    params = camera_params(camera_1={"planes": ["rgb", "depth"]})
    with mjfast.MujocoEnv(XML_UNNAMED, params=params, render_sync=True) as env:
        assert env.model.cam(1).name == ""
        camera = env.open_offscreen_camera("camera_1")
        assert camera.plane_configured("depth")  # its parameters, under cameras/camera_1
        camera.enable_frames()
        env.step(30)
        expected = data_after(env.model, 18)
        with camera.take_latest("rgb") as lease:
            np.testing.assert_array_equal(lease.data, reference(env.model, expected, 1))
            assert not np.array_equal(lease.data, reference(env.model, expected, "front"))
        env.reload()  # rebinds by the same name
        env.step(30)
        assert camera.take_latest("rgb") is not None


@pytest.mark.parametrize("name", ["camera_0", "camera_2", "camera_9", "camera_01", "camera_"])
def test_a_synthesised_name_names_only_an_unnamed_camera(name):
    with mjfast.MujocoEnv(XML_UNNAMED, render_sync=True) as unnamed:
        with pytest.raises(KeyError) as raised:
            unnamed.open_offscreen_camera(name)  # 0 and 2 are named: front, side
        assert "camera_1" in str(raised.value)


def test_camera_publisher_publishes_unnamed_cameras():
    params = camera_params(camera_1={"rate_hz": 100.0})
    params["mujoco_server"]["MujocoPlugins"] = [{"name": "cams", "type": "mjfast/CameraPublisher"}]
    with mjfast.MujocoEnv(XML_UNNAMED, params=params, render_sync=True) as env:
        assert env.plugins[0].state == mjfast.PluginState.ACTIVE
        env.step(20)
        message = env.bus.latest("/mujoco_server/cams/camera_1/rgb")
    assert message is not None and message["camera"] == "camera_1"


@pytest.mark.parametrize(("config", "fragment"), [
    ({"planes": ["rgb", "colour"]}, "planes: unknown plane 'colour'"),
    ({"planes": "depht"}, "planes: unknown plane 'depht'"),
    ({"cameras": []}, "cameras must name at least one camera"),
    ({"cameras": ["front", "front"]}, "cameras lists 'front' more than once"),
])
def test_camera_publisher_misconfiguration_is_a_load_failure(config, fragment):
    params = {"mujoco_server": {"MujocoPlugins": [
        {"name": "cams", "type": "mjfast/CameraPublisher", **config}]}}
    with mjfast.MujocoEnv(XML, params=params, render_sync=True) as env:
        (info,) = env.plugins
        assert info.state is mjfast.PluginState.FAILED
        assert fragment in info.failure.message


def test_a_camera_name_with_a_slash_takes_its_parameters_from_yaml(tmp_path):
    xml = XML.replace('<camera name="side"', '<camera name="left/eye"')
    params = tmp_path / "cameras.yaml"
    params.write_text("mujoco_server:\n  cameras:\n    left/eye: {width: 16, height: 12}\n")
    with mjfast.MujocoEnv(xml, params=params, render_sync=True) as env:
        camera = env.open_offscreen_camera("left/eye")
        camera.enable_frames()
        env.step(2)
        with camera.take_latest("rgb") as lease:
            assert (lease.width, lease.height) == (16, 12)


# -- MuJoCo errors on the render thread (issue 18, item 6) --------------------------------------
# The render thread called mjr_makeContext/mjr_render with no MuJoCo error guard: a scene MuJoCo
# refuses (here a render_callback's zero near plane: mju_error "frustum_near too small") ended
# the process. Now the render thread stops (the GL state after MuJoCo's error is unknown), the
# error is counted in statistics()["render"], raised once by the next step that captures and by
# open_offscreen_camera(), and a reload starts rendering afresh.


def test_a_mujoco_error_on_the_render_thread_stops_rendering_and_is_raised(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from _native_build import plugin_library_path
    from support import run_python

    library = plugin_library_path(tmp_path_factory)
    result = run_python(f"""
        import mjfast
        from mjfast.plugin.native import NativePlugin
        from support import CAMERA_XML
        mjfast.register_plugin("tests/MujocoError", NativePlugin({str(library)!r}, "MujocoError"))
        params = {{"MujocoPlugins": [{{"type": "tests/MujocoError", "name": "broken",
                                      "in": "render", "first_instance_only": True}}]}}
        with mjfast.MujocoEnv(CAMERA_XML, params=params, render_sync=True) as env:
            camera = env.open_offscreen_camera("front")
            camera.enable_frames()
            try:
                env.step(100)  # the first capture fails on the render thread; a later step raises
            except RuntimeError as error:
                print("raised", type(error).__name__, "frustum_near" in str(error),
                      "env.reload()" in str(error))
            render = env.statistics()["render"]
            print("counted", render["render_errors"], "frustum_near" in render["render_error"],
                  render["frames_rendered"])
            env.step(100)  # raised once; stepping goes on without rendering
            print("frames", camera.take_latest())
            try:
                env.open_offscreen_camera("side")
            except RuntimeError as error:
                print("open", "rendering stopped" in str(error))
            env.reload()  # a fresh render thread and context; this plugin instance behaves
            env.step(100)
            lease = camera.take_latest()
            print("recovered", lease is not None and lease.data.shape[2] == 3,
                  env.statistics()["render"]["render_errors"])
            print("plugin", env.plugins[0].state.name)
    """, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "raised RuntimeError True True",
        "counted 1 True 0",
        "frames None",
        "open True",
        "recovered True 1",
        "plugin ACTIVE",
    ]


def test_the_planes_and_camera_keys_are_the_cores_tables():
    # kPlaneNames (frame_store.h) and kCameraKeys (bind_render.cc): the Python side checks and
    # fills in exactly what the core reads.
    assert PLANES == _core.PLANES == ("rgb", "depth", "segmentation")
    assert CAMERA_KEYS == _core.CAMERA_KEYS
    model = mujoco.MjModel.from_xml_string(XML)
    assert set(camera_config(ParameterServer(), "/mujoco_server", model, "front")) == set(
        CAMERA_KEYS)


def test_an_unknown_camera_parameter_is_refused_with_its_close_match():
    model = mujoco.MjModel.from_xml_string(XML)
    params = ParameterServer(camera_params(front={"widht": 8}))
    with pytest.raises(mjfast.ConfigError) as raised:
        camera_config(params, "/mujoco_server", model, "front")
    assert str(raised.value) == (
        "/mujoco_server/cameras/front: unknown parameter 'widht' (did you mean 'width'?); its "
        "parameters are: width, height, planes, rate_hz, max_geom")
