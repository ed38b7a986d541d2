"""The benchmark models, built in code so that the benchmarks run wherever the repository is cloned.

Shared by every benchmark in bench/ (imported as `models`: pytest puts bench/ on sys.path for its
conftest.py). Owns the MJCF text only; compiling and timing are the benchmarks' business.
"""

from __future__ import annotations


def arm7_xml(*, camera: str | None = None, offscreen: tuple[int, int] | None = None) -> str:
    """A 7-dof arm: 7 hinges (radians, limited), 7 motors, an end-effector sensor, no contacts.

    Bare mj_step ~2.7 us/step, like /work/shared/models/arm7.xml (see README.md).
    For the camera benchmarks: `camera` adds a light and a fixed camera of that name watching
    the arm, `offscreen=(width, height)` sizes the offscreen buffer. Without them the MJCF is
    exactly the stepping benchmarks' (no light, no camera, no <visual>), so their figures hold.
    """
    links = [0.3, 0.3, 0.3, 0.25, 0.2, 0.1]
    axes = ["0 0 1", "0 1 0"]
    body = ('<joint name="j7" axis="0 0 1"/>'
            '<geom type="box" size="0.05 0.05 0.02"/><site name="ee"/>')
    # Built inside out: each link wraps the ones further out along the chain.
    for index in range(len(links), 0, -1):
        length = links[index - 1]
        body = (f'<joint name="j{index}" axis="{axes[(index - 1) % 2]}"/>'
                f'<geom fromto="0 0 0 0 0 {length}"/>'
                f'<body name="l{index + 1}" pos="0 0 {length}">{body}</body>')
    motors = "".join(f'<motor joint="j{i}"/>' for i in range(1, 8))
    # Each insertion is a whole line, or nothing at all.
    visual = ""
    if offscreen is not None:
        width, height = offscreen
        visual = f'  <visual><global offwidth="{width}" offheight="{height}"/></visual>\n'
    watch = ""
    if camera is not None:
        watch = (f'    <light pos="0 0 3"/>\n'
                 f'    <camera name="{camera}" pos="1.5 -1.5 1.2" xyaxes="1 1 0 -0.3 0.3 1"/>\n')
    return f"""
<mujoco model="bench_arm7">
  <compiler angle="radian"/>
  <option timestep="0.002"/>
{visual}  <default>
    <joint type="hinge" damping="0.5" armature="0.01" range="-2.8 2.8" limited="true"/>
    <geom type="capsule" size="0.04" density="1000" contype="0" conaffinity="0"/>
    <motor ctrlrange="-50 50" ctrllimited="true"/>
  </default>
  <worldbody>
{watch}    <geom type="plane" size="2 2 0.1"/>
    <body name="l1" pos="0 0 0.1">{body}</body>
  </worldbody>
  <actuator>{motors}</actuator>
  <sensor><framepos objtype="site" objname="ee"/></sensor>
</mujoco>
"""


def _leg(side: str, y: float) -> str:
    s = -1 if side == "left" else 1
    return f"""
      <body name="thigh_{side}" pos="0 {y} -0.04">
        <joint name="hip_x_{side}" axis="{s} 0 0" range="-30 10" class="big"/>
        <joint name="hip_z_{side}" axis="0 0 {s}" range="-60 35" class="big"/>
        <joint name="hip_y_{side}" axis="0 1 0" range="-150 20" class="big"/>
        <geom name="thigh_{side}" fromto="0 0 0 0 {-s * 0.01} -0.34" size="0.06"/>
        <body name="shin_{side}" pos="0 {-s * 0.01} -0.403">
          <joint name="knee_{side}" pos="0 0 0.02" axis="0 -1 0" range="-160 2"/>
          <geom name="shin_{side}" fromto="0 0 0 0 0 -0.3" size="0.049"/>
          <body name="foot_{side}" pos="0 0 -0.39">
            <joint name="ankle_y_{side}" pos="0 0 0.08" axis="0 1 0" range="-50 50"/>
            <joint name="ankle_x_{side}" pos="0 0 0.04" axis="{s} 0 0.5" range="-50 50"/>
            <geom name="foot1_{side}" fromto="-0.07 {s * 0.01} 0 0.14 {s * 0.03} 0" size="0.027"/>
            <geom name="foot2_{side}" fromto="-0.07 {-s * 0.01} 0 0.14 {-s * 0.03} 0"
                  size="0.027"/>
          </body>
        </body>
      </body>"""


def _arm(side: str, y: float) -> str:
    s = -1 if side == "left" else 1
    return f"""
    <body name="upper_arm_{side}" pos="0 {y} 0.06">
      <joint name="shoulder1_{side}" axis="2 {-s} 1" range="-85 60"/>
      <joint name="shoulder2_{side}" axis="0 {s} 1" range="-85 60"/>
      <geom name="upper_arm_{side}" fromto="0 0 0 0.16 {-s * 0.16} -0.16" size="0.04"/>
      <body name="lower_arm_{side}" pos="0.18 {-s * 0.18} -0.18">
        <joint name="elbow_{side}" axis="0 {s} 1" range="-100 50"/>
        <geom name="lower_arm_{side}" fromto="0.01 {s * 0.01} 0.01 0.17 {s * 0.17} 0.17"
              size="0.031"/>
        <body name="hand_{side}" pos="0.18 {s * 0.18} 0.18">
          <geom name="hand_{side}" type="sphere" size="0.04"/>
        </body>
      </body>
    </body>"""


def humanoid_xml() -> str:
    """MuJoCo's standard humanoid in structure: free joint + 21 hinges (27 dofs), 21 motors,
    capsules on a floor with contacts. Bare mj_step ~23 us/step (humanoid.xml: ~21).
    """
    hinges = ["abdomen_z", "abdomen_y", "abdomen_x"]
    for side in ("right", "left"):
        hinges += [f"hip_x_{side}", f"hip_z_{side}", f"hip_y_{side}", f"knee_{side}",
                   f"ankle_y_{side}", f"ankle_x_{side}"]
    for side in ("right", "left"):
        hinges += [f"shoulder1_{side}", f"shoulder2_{side}", f"elbow_{side}"]
    motors = "".join(f'<motor name="{j}" joint="{j}" gear="40"/>' for j in hinges)
    return f"""
<mujoco model="bench_humanoid">
  <option timestep="0.005"/>
  <default>
    <motor ctrlrange="-1 1" ctrllimited="true"/>
    <geom type="capsule" condim="1" friction="0.7" solimp="0.9 0.99 0.003" solref="0.015 1"/>
    <joint type="hinge" damping="0.2" stiffness="1" armature="0.01" limited="true"
           solimplimit="0 0.99 0.01"/>
    <default class="big">
      <joint damping="5" stiffness="10"/>
    </default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 0.05" condim="3"/>
    <light name="top" pos="0 0 3" dir="0 0 -1"/>
    <body name="torso" pos="0 0 1.282">
      <freejoint name="root"/>
      <geom name="torso" fromto="0 -0.07 0 0 0.07 0" size="0.07"/>
      <geom name="waist_upper" fromto="-0.01 -0.06 -0.12 -0.01 0.06 -0.12" size="0.06"/>
      <body name="head" pos="0 0 0.19">
        <geom name="head" type="sphere" size="0.09"/>
      </body>
      <body name="waist_lower" pos="-0.01 0 -0.26">
        <geom name="waist_lower" fromto="0 -0.06 0 0 0.06 0" size="0.06"/>
        <joint name="abdomen_z" pos="0 0 0.065" axis="0 0 1" range="-45 45" class="big"/>
        <joint name="abdomen_y" pos="0 0 0.065" axis="0 1 0" range="-75 30" class="big"/>
        <body name="pelvis" pos="0 0 -0.165">
          <joint name="abdomen_x" pos="0 0 0.1" axis="1 0 0" range="-35 35" class="big"/>
          <geom name="butt" fromto="-0.02 -0.07 0 -0.02 0.07 0" size="0.09"/>
          {_leg("right", -0.1)}
          {_leg("left", 0.1)}
        </body>
      </body>
      {_arm("right", -0.17)}
      {_arm("left", 0.17)}
    </body>
  </worldbody>
  <actuator>{motors}</actuator>
  <sensor><subtreecom body="torso"/></sensor>
</mujoco>
"""
