"""The examples (examples/): every flag has help, and what they draw is right."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast


def failure_of(env: mjfast.MujocoEnv, name: str) -> mjfast.PluginLoadFailure:
    info = next(p for p in env.plugins if p.name == name)
    assert info.state is mjfast.PluginState.FAILED and info.failure is not None, info
    return info.failure



# -- examples -----------------------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _example(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["record_camera", "control_loop"])
def test_every_flag_of_the_examples_has_help(name: str) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--help"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    options = [i for i, line in enumerate(lines) if line.startswith("  -")]
    assert len(options) >= 3
    for i in options:
        # "  --flag VALUE   help..." or the help on the next, deeper indented line.
        has_help = "   " in lines[i].strip() or (
            i + 1 < len(lines) and lines[i + 1].startswith("    ")
            and not lines[i + 1].lstrip().startswith("-"))
        assert has_help, f"{name}.py: no help for {lines[i].strip()!r}"


def test_record_camera_scales_depth_to_the_scene_not_the_far_plane() -> None:
    record = _example("record_camera")
    model = mujoco.MjModel.from_xml_string(record.DEMO_XML)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    near, far = record.scene_depth_range(model, data, 0)
    assert 0 <= near < 2.0 < far < 10.0  # the camera is ~2.7 m from a scene a few metres wide
    # The scene at 2-3 m, the background at the far plane (mujoco's default: 50 x extent).
    depth = np.full((4, 4), 50.0 * float(model.stat.extent), dtype=np.float32)
    depth[:2] = np.linspace(2.0, 3.0, 8, dtype=np.float32).reshape(2, 4)
    grey = record.to_rgb("depth", depth, (near, far))[..., 0].astype(int)
    assert (grey[2:] == 0).all()  # the background is black
    assert grey[:2].max() - grey[:2].min() >= 30  # the scene spans visible greys
    assert grey[0, 0] > grey[1, 3]  # nearer is brighter
