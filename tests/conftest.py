"""Fixtures shared by the env, host, hooks and plugin tests: small models, plugin registration
that is undone after each test, envs that are always closed, and MuJoCo's global hooks restored
to mjfast whatever a test did to them."""

from __future__ import annotations

import os

# Offscreen cameras render headless through EGL; mujoco picks its GL backend when first imported.
os.environ.setdefault("MUJOCO_GL", "egl")

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import pytest

import mjfast
from support import BOX_XML, JOURNAL, TWO_LINK_ARM_XML, Journal, arm_xml, free_port, zenoh_router


@pytest.fixture(autouse=True)
def journal() -> Iterator[Journal]:
    """The recording plugins' journal, empty at the start of each test."""
    JOURNAL.clear()
    yield JOURNAL
    JOURNAL.clear()


@pytest.fixture(autouse=True)
def _restore_hooks() -> Iterator[None]:
    # A test that replaces mjcb_control/mjcb_passive must not break every test after it.
    yield
    mjfast.install_hooks()


@pytest.fixture(scope="module")
def router() -> Iterator[tuple[str, int]]:
    """A Zenoh router that is not mjfast (support.zenoh_router) on a free loopback port, for one
    test module: its endpoint and port."""
    port = free_port()
    with zenoh_router(f"tcp/127.0.0.1:{port}"):
        yield f"tcp/127.0.0.1:{port}", port


@pytest.fixture
def arm() -> str:
    """The 7-dof arm as an MJCF string."""
    return arm_xml()


@pytest.fixture
def arm_path(tmp_path: Path) -> Path:
    """The 7-dof arm as an MJCF file (tests may rewrite it before a reload)."""
    path = tmp_path / "arm.xml"
    path.write_text(arm_xml())
    return path


@pytest.fixture
def arm_file(tmp_path: Path) -> Path:
    """The two-link arm (support.TWO_LINK_ARM_XML) as an MJCF file, for the command line."""
    path = tmp_path / "arm.xml"
    path.write_text(TWO_LINK_ARM_XML)
    return path


@pytest.fixture
def box() -> str:
    """A free-floating box above a floor plane, as an MJCF string."""
    return BOX_XML


@pytest.fixture
def arm_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(arm_xml())


@pytest.fixture
def envs() -> Iterator[list[mjfast.MujocoEnv]]:
    """A list the test appends the envs it makes to; each is closed after the test."""
    made: list[mjfast.MujocoEnv] = []
    yield made
    for env in made:
        env.close()


@pytest.fixture
def register() -> Iterator[Callable[..., str]]:
    """`register(cls, type_name=None)` registers a plugin class (default type "test/<Class>")
    for this test only and returns its type name."""
    registered: list[str] = []

    def register(cls: type, type_name: str | None = None) -> str:
        name = type_name or f"test/{cls.__name__}"
        mjfast.register_plugin(name, cls)
        if name not in registered:
            registered.append(name)
        return name

    yield register
    for name in registered:
        mjfast.unregister_plugin(name)


@pytest.fixture
def make_env() -> Iterator[Callable[..., mjfast.MujocoEnv]]:
    """`make_env(model, **kwargs)` builds a MujocoEnv that is closed after the test."""
    envs: list[mjfast.MujocoEnv] = []

    def make(model: Any, **kwargs: Any) -> mjfast.MujocoEnv:
        env = mjfast.MujocoEnv(model, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.fixture
def env(make_env: Callable[..., mjfast.MujocoEnv], arm: str) -> mjfast.MujocoEnv:
    """An arm env without plugins."""
    return make_env(arm)
