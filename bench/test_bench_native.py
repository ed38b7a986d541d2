"""Benchmarks of the native path: mjfast against bare MuJoCo, measured in the same run as ratios.

Each case times both sides interleaved (best of several rounds, so load from other processes
hurts both alike), asserts that they computed the same thing, records the mjfast side with
pytest-benchmark and the ratio in its extra_info, and prints a ratio table at the end (-s).
A ratio above target * MJFAST_BENCH_SLACK (default 1.10) fails: this is a shared 2-core machine.
Run: python -m pytest bench/test_bench_native.py -s
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjfast

SLACK = float(os.environ.get("MJFAST_BENCH_SLACK", "1.10"))
ROUNDS = int(os.environ.get("MJFAST_BENCH_ROUNDS", "7"))
_ratios: list[tuple[str, float, float, str]] = []


def _arm_xml() -> str:
    """A 7-dof arm: a chain of hinges with motors, no contacts."""
    bodies, closes, motors = [], [], []
    for i in range(7):
        axis = "0 0 1" if i % 2 == 0 else "0 1 0"
        bodies.append(
            f'<body name="link{i}" pos="0 0 {0.0 if i == 0 else 0.25}">'
            f'<joint name="j{i}" type="hinge" axis="{axis}" damping="0.5" armature="0.1"/>'
            f'<geom type="capsule" size="0.04" fromto="0 0 0 0 0 0.25" mass="{2.0 - 0.2 * i}"/>')
        closes.append("</body>")
        motors.append(f'<motor name="m{i}" joint="j{i}" gear="1"/>')
    return (f'<mujoco><option timestep="0.002"/><worldbody>{"".join(bodies)}{"".join(closes)}'
            f'</worldbody><actuator>{"".join(motors)}</actuator></mujoco>')


def _limb(name: str, pos: str, fromto: str, axes: list[str]) -> str:
    joints = "".join(f'<joint name="{name}_{k}" type="hinge" axis="{a}" range="-90 90"/>'
                     for k, a in enumerate(axes))
    return (f'<body name="{name}" pos="{pos}">{joints}'
            f'<geom type="capsule" size="0.05" fromto="{fromto}"/>')


def _humanoid_xml() -> str:
    """A 28-dof humanoid (free root, spine, arms, legs) standing on a floor: contacts included."""
    leg = lambda side, y: (  # noqa: E731
        _limb(f"{side}_thigh", f"0 {y} -0.1", "0 0 0 0 0 -0.4", ["1 0 0", "0 1 0", "0 0 1"])
        + _limb(f"{side}_shin", "0 0 -0.42", "0 0 0 0 0 -0.4", ["0 1 0"])
        + _limb(f"{side}_foot", "0 0 -0.45", "-0.05 0 0 0.15 0 0", ["0 1 0", "1 0 0"])
        + "</body></body></body>")
    arm = lambda side, y: (  # noqa: E731
        _limb(f"{side}_upper_arm", f"0 {y} 0.45", f"0 0 0 0 {y} -0.3", ["1 0 0", "0 1 0"])
        + _limb(f"{side}_lower_arm", f"0 {y} -0.3", "0 0 0 0 0 -0.3", ["0 1 0"])
        + "</body></body>")
    body = (
        '<body name="torso" pos="0 0 1.3"><freejoint/>'
        '<geom type="capsule" size="0.08" fromto="0 -0.08 0.45 0 0.08 0.45"/>'
        '<geom name="head" type="sphere" size="0.1" pos="0 0 0.65"/>'
        + _limb("abdomen", "0 0 0.2", "0 -0.07 0 0 0.07 0", ["0 0 1", "0 1 0", "1 0 0"])
        + _limb("pelvis", "0 0 -0.15", "0 -0.07 0 0 0.07 0", ["1 0 0"])
        + leg("right", -0.1) + leg("left", 0.1) + "</body></body>"
        + arm("right", -0.18) + arm("left", 0.18) + "</body>")
    return ('<mujoco><option timestep="0.005"/><default><geom condim="3" friction="1 .1 .1"/>'
            '<joint damping="1" armature="0.01"/></default><worldbody>'
            '<geom name="floor" type="plane" size="10 10 0.1"/>'
            f'{body}</worldbody></mujoco>')


@pytest.fixture(scope="module")
def arm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(_arm_xml())


@pytest.fixture(scope="module")
def humanoid() -> mujoco.MjModel:
    model = mujoco.MjModel.from_xml_string(_humanoid_xml())
    assert model.nv == 28
    return model


@pytest.fixture(scope="module", autouse=True)
def _ratio_table() -> Iterator[None]:
    yield
    if _ratios:
        print("\n\nmjfast native benchmarks (ratio = mjfast / reference, best of "
              f"{ROUNDS} interleaved rounds)")
        print(f"{'case':58} {'ratio':>7} {'target':>7}  verdict")
        for case, ratio, target, comparison in _ratios:
            ok = ratio <= target if comparison == "le" else ratio >= target
            sign = "<=" if comparison == "le" else ">="
            print(f"{case:58} {ratio:7.3f} {sign}{target:5.2f}  {'met' if ok else 'MISSED'}")


def _bare_hooks() -> Any:
    """Context: MuJoCo's global callbacks empty (bare MuJoCo), mjfast's reinstalled after."""

    class Bare:
        def __enter__(self) -> None:
            mujoco.set_mjcb_control(None)
            mujoco.set_mjcb_passive(None)

        def __exit__(self, *exc: object) -> None:
            mujoco.set_mjcb_control(None)
            mujoco.set_mjcb_passive(None)
            mjfast.install_hooks()

    return Bare()


def _best(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _compare(name: str, fast: Callable[[], None], reference: Callable[[], None],
             target: float, benchmark: Any, *, reference_bare: bool = True) -> float:
    """Times both interleaved; ratio = best fast / best reference (lower is better)."""
    fast()
    with _bare_hooks() if reference_bare else _nullcontext():
        reference()
    fast_times, reference_times = [], []
    for _ in range(ROUNDS):
        fast_times.append(_best(fast))
        with _bare_hooks() if reference_bare else _nullcontext():
            reference_times.append(_best(reference))
    ratio = min(fast_times) / min(reference_times)
    benchmark.extra_info.update(ratio=ratio, target=target,
                                reference_s=min(reference_times))
    benchmark.pedantic(fast, rounds=3, iterations=1)
    _ratios.append((name, ratio, target, "le"))
    assert ratio <= target * SLACK, f"{name}: {ratio:.3f}x (target {target}x)"
    return ratio


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _env(model: mujoco.MjModel, plugins: list[dict[str, Any]]) -> mjfast.MujocoEnv:
    return mjfast.MujocoEnv(model, params={"MujocoPlugins": plugins})


# -- four NoOps vs bare mj_step -----------------------------------------------------------------


@pytest.mark.parametrize(("model_name", "nstep", "target"), [("arm", 2000, 1.03),
                                                             ("humanoid", 500, 1.01)])
def test_noop_plugins_cost_nothing(request: pytest.FixtureRequest, benchmark: Any,
                                   model_name: str, nstep: int, target: float) -> None:
    model = request.getfixturevalue(model_name)
    with _env(model, [{"type": "mjfast/NoOp", "name": f"noop{i}"} for i in range(4)]) as env:
        data = mujoco.MjData(model)
        env.data.qpos[:] = data.qpos  # the same initial state on both sides

        def fast() -> None:
            mujoco.mj_resetData(model, env.data)  # every round from the same state
            env.step(nstep)

        def reference() -> None:
            mujoco.mj_resetData(model, data)
            mujoco.mj_step(model, data, nstep=nstep)

        _compare(f"4x NoOp env.step({nstep}) vs mj_step nstep ({model_name})", fast, reference,
                 target, benchmark)
        # Correctness: both sides ran the same steps from the same state, bit for bit.
        np.testing.assert_array_equal(env.data.qpos, data.qpos)
        np.testing.assert_array_equal(env.data.qvel, data.qvel)
        stats = env.statistics()
        calls = stats["plugins"][3]["callbacks"]["control_callback"]["calls"]
        assert calls == stats["env"]["steps"] == (ROUNDS + 1 + 3) * nstep


# -- PDController vs a C callback -----------------------------------------------------------------


def _tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.is_file() else (shutil.which(name) or name)


@pytest.fixture(scope="module")
def pd_reference(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    source = Path(__file__).resolve().parent / "native"
    build = tmp_path_factory.mktemp("bench-native")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    for command in (
        [_tool("cmake"), "-S", str(source), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
         f"-DPython_EXECUTABLE={sys.executable}", f"-Dmjfast_DIR={mjfast.get_cmake_dir()}"],
        [_tool("cmake"), "--build", str(build)],
    ):
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        assert result.returncode == 0, result.stdout + result.stderr
    return ctypes.CDLL(str(build / "libpd_reference.so"))


def test_pd_controller_vs_c_callback(arm: mujoco.MjModel, pd_reference: ctypes.CDLL,
                                     benchmark: Any) -> None:
    n = 7
    kp, kd = [50.0 - 5 * i for i in range(n)], [5.0] * n
    targets = [0.3 * (-1) ** i for i in range(n)]
    plugin = {"type": "mjfast/PDController", "joints": [f"j{i}" for i in range(n)],
              "gains": {"kp": kp, "kd": kd}, "targets": targets}
    ints, doubles = ctypes.c_int * n, ctypes.c_double * n
    pd_reference.pd_configure(
        n, ints(*arm.jnt_qposadr[:n]), ints(*arm.jnt_dofadr[:n]), ints(*range(n)),
        doubles(*kp), doubles(*kd), doubles(*targets))
    callback_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)
    c_callback = ctypes.cast(pd_reference.pd_control, callback_type)
    nstep = 2000
    with _env(arm, [plugin]) as env:
        data = mujoco.MjData(arm)

        def fast() -> None:
            mujoco.mj_resetData(arm, env.data)  # every round from the same state
            env.step(nstep)

        def reference() -> None:
            mujoco.mj_resetData(arm, data)
            mujoco.set_mjcb_control(c_callback)
            try:
                mujoco.mj_step(arm, data, nstep=nstep)
            finally:
                mujoco.set_mjcb_control(None)

        _compare("PDController env.step vs C mjcb_control (arm)", fast, reference, 1.05,
                 benchmark)
        assert mjfast.hooks_owned()
        # Correctness: the same law from the same state gives the same trajectory.
        np.testing.assert_allclose(env.data.qpos, data.qpos, rtol=0, atol=1e-12)
        np.testing.assert_allclose(env.data.ctrl, data.ctrl, rtol=0, atol=1e-9)
        assert env.data.qpos[0] == pytest.approx(targets[0], abs=0.02)  # no gravity on j0


# -- env.step(1) from Python vs mj_step from Python ---------------------------------------------


def test_python_loop_step_overhead(arm: mujoco.MjModel, benchmark: Any) -> None:
    loops = 2000
    with _env(arm, [{"type": "mjfast/NoOp"}]) as env:
        data = mujoco.MjData(arm)
        step = env.step
        mj_step = mujoco.mj_step

        def fast() -> None:
            mujoco.mj_resetData(arm, env.data)
            for _ in range(loops):
                step(1)

        def reference() -> None:
            mujoco.mj_resetData(arm, data)
            for _ in range(loops):
                mj_step(arm, data)

        _compare("env.step(1) Python loop vs mj_step Python loop (arm)", fast, reference, 1.1,
                 benchmark)
        assert env.statistics()["env"]["steps"] == (ROUNDS + 1 + 3) * loops
        np.testing.assert_array_equal(env.data.qpos, data.qpos)


# -- parallel envs ------------------------------------------------------------------------------


def _threads_rate(work: list[Callable[[], None]], steps_each: int) -> float:
    """Aggregate steps per second of running each callable on its own thread at once."""
    barrier = threading.Barrier(len(work) + 1)

    def run(fn: Callable[[], None]) -> None:
        barrier.wait()
        fn()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in work]
    for thread in threads:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return len(work) * steps_each / (time.perf_counter() - start)


def test_two_envs_on_two_threads(humanoid: mujoco.MjModel, benchmark: Any) -> None:
    nstep = 2000
    envs = [_env(humanoid, [{"type": "mjfast/NoOp"}]) for _ in range(2)]
    try:
        one = max(_threads_rate([lambda: envs[0].step(nstep)], nstep) for _ in range(3))
        two = max(_threads_rate([lambda e=e: e.step(nstep) for e in envs], nstep)
                  for _ in range(3))
        speedup = two / one
        benchmark.extra_info.update(speedup=speedup, one_env_steps_per_s=one,
                                    two_envs_steps_per_s=two)
        benchmark.pedantic(lambda: envs[0].step(100), rounds=3, iterations=1)
        _ratios.append(("2 envs on 2 threads vs 1 env, aggregate steps/s (humanoid)", speedup,
                        1.7, "ge"))
        for env in envs:
            stats = env.statistics()
            calls = stats["plugins"][0]["callbacks"]["control_callback"]["calls"]
            assert calls == stats["env"]["steps"]  # each env dispatched to its own plugin
        # Reference: mujoco.rollout with two threads vs one, same model and step count.
        state_size = mujoco.mj_stateSize(humanoid, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        datas = [mujoco.MjData(humanoid) for _ in range(2)]
        initial = np.zeros((2, state_size))
        for row in initial:
            mujoco.mj_getState(humanoid, datas[0], row, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        from mujoco import rollout

        def rollout_rate(threads: int) -> float:
            start = time.perf_counter()
            rollout.rollout(humanoid, datas[:threads], initial[:threads] if threads > 1
                            else initial[:1], nstep=nstep)
            return threads * nstep / (time.perf_counter() - start)

        rollout_one = max(rollout_rate(1) for _ in range(3))
        rollout_two = max(rollout_rate(2) for _ in range(3))
        _ratios.append(("reference: mujoco.rollout 2 threads vs 1 (humanoid)",
                        rollout_two / rollout_one, 1.7, "ge"))
        benchmark.extra_info.update(rollout_speedup=rollout_two / rollout_one)
        # Only a floor is asserted: other processes share these two cores.
        assert speedup > 1.2 or speedup > 0.8 * rollout_two / rollout_one
    finally:
        for env in envs:
            env.close()
