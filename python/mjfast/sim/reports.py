"""What an env reports about itself, built from its public face and its core's figures:
`info()` (SPEC §13), `statistics()` (SPEC §8) and `strict=True`'s error naming every plugin that
failed to load.

It does not own the figures (the compiled EnvCore, PluginHost and RenderCore count them) nor
their table (`mjfast.sim.stats_table`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mujoco

from mjfast._core_loader import _core
from mjfast.errors import PluginError
from mjfast.model.info import model_name
from mjfast.plugin.base import PluginState

if TYPE_CHECKING:
    from mjfast.sim.env import MujocoEnv

__all__ = ["env_info", "env_statistics", "strict_error"]

# MuJoCo's warning kinds, as mujoco names them (mjWARN_CONTACTFULL -> "contactfull").
_WARNING_KINDS = {name[len("mjWARN_"):].lower(): int(kind)
                  for name, kind in mujoco.mjtWarning.__members__.items()
                  if name.startswith("mjWARN_")}


def env_info(env: MujocoEnv, source_label: str, randomization: Any) -> dict[str, Any]:
    """env.info(): `source_label` says where the model came from, `randomization` is what the
    `randomize` terms drew at the last reset."""
    return {
        "model_name": model_name(env.model),
        "model_source": source_label,
        "model_generation": env.model_generation,
        "plugin_generation": env.plugin_generation,
        "loads": env.model_generation,  # one bind at construction, one per reload
        "running": env.running,
        "paused": env.paused,
        "step_count": env.step_count,
        "time": float(env.data.time),
        "realtime_factor": env.realtime_factor,
        "measured_realtime_factor": env.measured_realtime_factor,
        # What the `randomize` terms drew at the last reset (SPEC §21): per term, the model
        # values of its objects, or the noise added to their joints.
        "randomization": copy.deepcopy(randomization),
    }


def env_statistics(env: MujocoEnv, core_statistics: Mapping[str, Any],
                   render_statistics: dict[str, Any]) -> dict[str, Any]:
    """env.statistics(): the core's figures with the env's, each plugin's, and the render's."""
    figures = dict(core_statistics)
    figures["model_generation"] = env.model_generation
    figures["plugin_generation"] = env.plugin_generation
    figures["timing_sample_interval"] = int(_core.TIMING_SAMPLE_INTERVAL)
    # MuJoCo's own counts in the data, by kind (since the data's last reset): a warning is
    # otherwise only a line in MUJOCO_LOG.TXT.
    warnings = env.data.warning
    figures["warnings"] = {name: int(warnings[index].number)
                           for name, index in _WARNING_KINDS.items()}
    figures["paused"] = env.paused
    figures["step_count"] = env.step_count
    plugins = []
    for info in env.plugins:
        # JSON-able as it is: the state is a str enum, the failure a plain dict.
        failure = None if info.failure is None else {"phase": info.failure.phase,
                                                     "message": info.failure.message,
                                                     "traceback": info.failure.traceback}
        plugins.append({"name": info.name, "type": info.type, "state": info.state,
                        "failure": failure, **info.stats})
    return {"env": figures, "plugins": plugins, "render": render_statistics}


def strict_error(env: MujocoEnv, when: str) -> PluginError | None:
    """strict=True's PluginError naming every plugin of `env` that failed to load; None if
    none did."""
    failed = [info for info in env.plugins
              if info.state is PluginState.FAILED and info.failure is not None]
    if not failed:
        return None
    first = failed[0].failure
    assert first is not None
    described = "; ".join(
        f"plugin '{info.name}' ({info.type}) failed in {info.failure.phase}: "
        f"{info.failure.message}" for info in failed if info.failure is not None)
    return PluginError(f"{described} (strict=True, at {when})", first.name, first.type,
                       first.phase)
