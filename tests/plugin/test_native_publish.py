"""Publishing from native plugins (plugin_abi.h's host service `publish`, docs/native_plugins.md):
typed fields become a dict with numpy arrays on the env's bus, topics resolve in the plugin's node
namespace as a Python plugin's do, and malformed fields or failed publications are errors.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import mjfast
from _native_build import plugin_library_path
from mjfast.plugin.native import NativePlugin
from support import wait_for

TYPE = "tests/Publisher"
NS = "/mujoco_server"
XML = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody><body><joint type="hinge"/><geom size="0.1"/></body></worldbody>
</mujoco>
"""


@pytest.fixture(scope="module", autouse=True)
def publisher_type(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    library: Path = plugin_library_path(tmp_path_factory)
    mjfast.register_plugin(TYPE, NativePlugin(library, "Publisher"))
    yield
    mjfast.unregister_plugin(TYPE)


def publisher_env(envs: list[mjfast.MujocoEnv], **config: Any) -> mjfast.MujocoEnv:
    entry = {"type": TYPE, "name": "pub", **config}
    env = mjfast.MujocoEnv(XML, params={"mujoco_server": {"MujocoPlugins": [entry]}})
    envs.append(env)
    assert env.plugins[0].state is mjfast.PluginState.ACTIVE, env.plugins[0].failure
    return env


def test_fields_become_a_dict_of_python_values_and_numpy_copies(
        envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs)
    received: list[dict[str, Any]] = []
    env.bus.subscribe(f"{NS}/pub/out", received.append)
    env.step(2)
    first, second = received
    assert list(first) == ["time", "step", "label", "matrix", "ranges", "ids", "empty"]
    assert first["time"] == pytest.approx(0.01) and type(first["time"]) is float
    assert first["step"] == 1 and type(first["step"]) is int
    assert first["label"] == "pub says hi"
    assert first["matrix"].dtype == np.float64 and first["matrix"].shape == (2, 3)
    assert first["ranges"].dtype == np.float32 and first["ranges"].shape == (3,)
    assert first["ids"].dtype == np.int32
    np.testing.assert_array_equal(first["ids"], [7, -8, 9])
    assert first["empty"].shape == (0, 3)
    # Each publication is a copy: the plugin reuses its buffers, earlier messages keep theirs.
    np.testing.assert_array_equal(first["matrix"], np.full((2, 3), 1.0))
    np.testing.assert_array_equal(second["matrix"], np.full((2, 3), 2.0))
    assert second["time"] == pytest.approx(0.02)


@pytest.mark.parametrize(("topic", "resolved"), [
    ("~out", f"{NS}/pub/out"),
    ("relative/x", f"{NS}/pub/relative/x"),
    ("/absolute", "/absolute"),
])
def test_topics_resolve_as_the_plugins_python_node_would(
        topic: str, resolved: str, envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs, topic=topic)
    env.step(1)
    assert env.bus.latest(resolved)["step"] == 1


def test_publishing_from_call_and_every_n_steps(envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs, every=5)
    env.step(12)
    assert env.bus.latest(f"{NS}/pub/out")["step"] == 10
    with env.acquire_plugin("pub") as plugin:
        plugin.call("publish", "/from_call")
    assert env.bus.latest("/from_call")["time"] == -1.0


@pytest.mark.parametrize(("what", "named"), [
    ("type", "type 99"),
    ("ndim", "ndim 5"),
    ("shape", "shape[0] = -2"),
    ("key", "NULL key"),
    ("data", "NULL data"),
])
def test_a_malformed_field_is_a_logic_error_naming_it_and_nothing_is_published(
        what: str, named: str, envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs, every=1000)
    with env.acquire_plugin("pub") as plugin:
        status, _, message = plugin.call("malformed", what).partition(" ")
    assert int(status) == -2  # MJFAST_LOGIC_ERROR
    assert named in message
    assert env.bus.latest(f"{NS}/pub/out") is None


def test_a_failed_publication_is_the_steps_plugin_error(envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs, topic="/")
    with pytest.raises(mjfast.PluginError) as raised:
        env.step(1)
    assert isinstance(raised.value.__cause__, RuntimeError)
    assert str(raised.value.__cause__) == "ValueError: topic name must not be empty, got '/'"


def test_publishing_from_the_physics_thread_reaches_subscribers(
        envs: list[mjfast.MujocoEnv]) -> None:
    env = publisher_env(envs, every=10)
    threads: set[str] = set()
    seen = threading.Event()

    def on_message(message: dict[str, Any]) -> None:
        threads.add(threading.current_thread().name)
        if message["step"] >= 100:
            seen.set()

    env.bus.subscribe(f"{NS}/pub/out", on_message)
    env.start(None)
    assert seen.wait(10)
    env.stop()
    assert threading.current_thread().name not in threads
    assert wait_for(lambda: not env.running)
