"""mjfast.model.geometry: set_geom_properties refuses what MuJoCo's compiler refuses."""

from __future__ import annotations

from collections.abc import Callable

import mujoco
import numpy as np
import pytest

import mjfast

SHAPES = """
<mujoco><worldbody>
  <geom name="sphere" type="sphere" size=".1"/>
  <geom name="capsule" type="capsule" size=".1 .2"/>
  <geom name="cylinder" type="cylinder" size=".1 .2"/>
  <geom name="box" type="box" size=".1 .2 .3"/>
  <geom name="ellipsoid" type="ellipsoid" size=".1 .2 .3"/>
</worldbody></mujoco>
"""


@pytest.mark.parametrize(("geom", "size", "used"), [
    ("sphere", [0, 0, 0], 1), ("capsule", [0.1, 0, 0], 2), ("cylinder", [0, 0.1, 0], 2),
    ("box", [0.1, 0.1, 0], 3), ("ellipsoid", [0.1, 0, 0.1], 3),
])
def test_a_zero_dimension_is_refused_as_the_compiler_refuses_it(
        make_env: Callable[..., mjfast.MujocoEnv], geom: str, size: list[float],
        used: int) -> None:
    env = make_env(SHAPES)
    before = env.model.geom(geom).size.copy()
    with pytest.raises(ValueError, match=f"the first {used} values? of a .* must be positive"):
        env.set_geom_properties(geom, size=size, rgba=[1, 0, 0, 1])
    np.testing.assert_array_equal(env.model.geom(geom).size, before)
    with pytest.raises(ValueError, match="must be positive"):  # as MuJoCo's compiler says
        mujoco.MjModel.from_xml_string(
            f'<mujoco><worldbody><geom type="{geom}" '
            f'size="{" ".join(map(str, size[:used]))}"/></worldbody></mujoco>')


def test_unused_size_values_may_be_zero(make_env: Callable[..., mjfast.MujocoEnv]) -> None:
    env = make_env(SHAPES)
    env.set_geom_properties("sphere", size=[0.3, 0, 0])
    assert env.model.geom("sphere").size[0] == 0.3
