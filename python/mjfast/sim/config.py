"""What an env is configured from, and what that configuration makes of a model: where the model
comes from (an MJCF or URDF file or text, read again at every reload; a URDF's meshes looked for
in the packages of the `package_paths` parameter), the parameter server, the world the
parameters make of a model (plugin specs, `options`, the `randomize` terms and their generator,
the `initial_joint_*` state), where a reset goes, and the warning about parameters that nothing
reads (SPEC §2, §5, §21, §24).

It does not own reading a URDF (`mjfast.model.urdf`), the plugin list's parsing
(`mjfast.plugin.config`), the randomisation terms (`mjfast.sim.randomize`), the parameter server
itself (`mjfast.bus.params`) nor the swap of a world into the running env (`mjfast.sim.env`).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeAlias

import mujoco
import numpy as np

from mjfast.bus.params import ParameterServer, resolve_name
from mjfast.errors import ConfigError
from mjfast.model import joints, options
from mjfast.model.info import is_mjcf_string
from mjfast.model.names import object_id
from mjfast.model.urdf import is_urdf_path, is_urdf_string, load_urdf
from mjfast.names import close_matches
from mjfast.plugin.config import PluginSpec, load_plugin_specs
from mjfast.plugin.discovery import resolve_plugin
from mjfast.sim.randomize import Randomizer, checked_seed, world_generator

__all__ = ["ENV_PARAMETERS", "ConfiguredWorld", "ModelLike", "ModelSource", "ParamsLike",
           "ResetTarget", "apply_initial_state", "parameter_server", "reread_parameters",
           "reset_target",
           "warn_unread_parameters"]

ModelLike: TypeAlias = str | os.PathLike[str] | mujoco.MjModel
ParamsLike: TypeAlias = ParameterServer | Mapping[str, Any] | str | os.PathLike[str] | None
# Where a reset goes, as EnvCore.reset_world takes it: (keyframe index or -1, qpos, qvel,
# keep_time).
ResetTarget: TypeAlias = tuple[int, np.ndarray, np.ndarray, bool]

# The env's own log: the warnings are about the env's parameters.
_log = logging.getLogger("mjfast.env")

# The parameters the env itself reads in its namespace (SPEC §2, §5, §10, §13, §21); with the
# plugins' namespaces and whatever the plugins read while loading, nothing else there is read by
# mjfast.
ENV_PARAMETERS = ("MujocoPlugins", "initial_joint_positions", "initial_joint_velocities",
                  "options", "cameras", "randomize", "seed", "package_paths")


class ModelFile(os.PathLike):  # type: ignore[type-arg]
    """A model file with the package directories given for it outside the parameters (the CLI's
    `--package-path PKG=DIR`), where a URDF's `package://` mesh URIs are looked for after the
    parameter `package_paths` (SPEC §24); a path wherever one is taken."""

    def __init__(self, path: str | os.PathLike[str], package_paths: Mapping[str, str]) -> None:
        self.path = os.fspath(path)
        self.package_paths = dict(package_paths)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"ModelFile({self.path!r}, {self.package_paths!r})"


@dataclass(frozen=True)
class ModelSource:
    """Where a model comes from, so that reload() can read it again: an MJCF or URDF file, MJCF
    or URDF text, or a mujoco.MjModel (copied)."""

    path: Path | None = None
    xml: str | None = None
    model: mujoco.MjModel | None = None
    # A URDF's package directories that came with its file (ModelFile), after the parameter's.
    package_paths: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, model: ModelLike) -> ModelSource:
        if isinstance(model, mujoco.MjModel):
            return cls(model=copy.copy(model))
        if is_mjcf_string(model):
            return cls(xml=model)  # type: ignore[arg-type]
        if isinstance(model, (str, os.PathLike)):
            # Resolved now: reload() re-reads the same file whatever the working directory then.
            return cls(path=Path(os.fspath(model)).resolve(),
                       package_paths=getattr(model, "package_paths", {}))
        raise TypeError(
            f"model must be a path to an MJCF/URDF file, an MJCF/URDF string or a "
            f"mujoco.MjModel, got {type(model).__name__}"
        )

    def compile(self, package_paths: Mapping[str, str] | None = None) -> mujoco.MjModel:
        """The model, read again from its file or text; a URDF's `package://` meshes looked for
        in `package_paths` (the parameter's), then in the file's own (SPEC §24)."""
        if self.model is not None:
            return copy.copy(self.model)
        packages = {**self.package_paths, **(package_paths or {})}
        if self.xml is not None:
            if is_urdf_string(self.xml):
                return load_urdf(text=self.xml, package_paths=packages)
            try:
                return mujoco.MjModel.from_xml_string(self.xml)
            except ValueError as error:
                raise ValueError(f"the MJCF string does not compile: {error}") from error
        assert self.path is not None
        if not self.path.is_file():
            raise FileNotFoundError(f"model file not found: {self.path}")
        if is_urdf_path(self.path):
            return load_urdf(self.path, package_paths=packages)
        try:
            return mujoco.MjModel.from_xml_path(str(self.path))
        except ValueError as error:
            raise ValueError(f"model {self.path} does not compile: {error}") from error


def compile_model(source: ModelSource, params: ParameterServer, namespace: str) -> mujoco.MjModel:
    """`source`'s model, a URDF's `package://` meshes looked for first in the packages of the
    parameter `<namespace>/package_paths` (`{PKG: DIR}`; ConfigError naming it when it is not
    that)."""
    name = resolve_name("package_paths", namespace)
    packages = params.get(name, None)
    if packages is not None and (not isinstance(packages, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in packages.items())):
        raise ConfigError(f"{name} must map package names to directories ({{PKG: DIR}}), got "
                          f"{packages!r}")
    return source.compile(packages)


def parameter_server(params: ParamsLike) -> tuple[ParameterServer, Path | None]:
    """The env's ParameterServer for `params`, and the YAML file it was read from (None: not a
    file), which reload() reads again."""
    if params is None:
        return ParameterServer(), None
    if isinstance(params, ParameterServer):
        return params, None
    if isinstance(params, Mapping):
        return ParameterServer(dict(params)), None
    if isinstance(params, (str, os.PathLike)):
        path = Path(params)
        if not path.is_file():
            raise FileNotFoundError(f"parameter file not found: {path}")
        server = ParameterServer()
        server.load_yaml(path)
        return server, path
    raise TypeError(
        f"params must be a ParameterServer, a dict or a path to a YAML file, "
        f"got {type(params).__name__}"
    )


def reread_parameters(params: ParameterServer, path: Path | None) -> ParameterServer:
    """What a reload reads: the YAML file `path` again over what `params` holds (its values win),
    in a new server that the reload copies into `params` once it commits (the env keeps its one
    ParameterServer, so references to env.params stay valid); `params` itself without a file."""
    if path is None:
        return params
    reread = ParameterServer(params.to_dict())
    reread.load_yaml(path)
    return reread


def apply_initial_state(
    model: mujoco.MjModel, data: mujoco.MjData, params: ParameterServer, namespace: str
) -> None:
    """Writes `initial_joint_positions` / `initial_joint_velocities` over the default state, both
    checked first (ConfigError naming the parameter)."""
    writes = []
    for key, kind in (("initial_joint_positions", "positions"),
                      ("initial_joint_velocities", "velocities")):
        name = resolve_name(key, namespace)
        try:
            writes.append(joints.checked_joint_values(model, params.get(name, None), kind))
        except (KeyError, ValueError) as error:
            raise ConfigError(f"{name}: {error.args[0]}") from error
    joints.write_joint_values(data, *writes)


@dataclass(frozen=True)
class ConfiguredWorld:
    """A model with what the parameters configure applied: its plugins' specs, `options`, the
    `randomize` terms (checked, drawn from the world's generator) and data at the initial
    state. Everything is checked here, before the env changes anything."""

    model: mujoco.MjModel
    data: mujoco.MjData
    specs: tuple[PluginSpec, ...]
    randomizer: Randomizer
    rng: np.random.Generator

    @classmethod
    def of(cls, model: mujoco.MjModel, params: ParameterServer, namespace: str, *,
           world_seed: int | None, world_index: int, given: object = None) -> ConfiguredWorld:
        """`model` configured by `params` in `namespace`; the generator is seeded by the `seed`
        parameter, or `world_seed` (a VectorEnv's), plus `world_index` (SPEC §21). `given`: the
        caller's own MjModel, which the draws go to a copy of. ConfigError naming the bad
        parameter."""
        specs = tuple(load_plugin_specs(params, namespace))
        options.apply_options(model, params.get(resolve_name("options", namespace), None))
        where = resolve_name("seed", namespace)
        seed = checked_seed(params.get(where, None), where)
        if world_seed is not None:
            seed = world_seed
        randomizer = Randomizer.from_params(model, params, namespace)
        rng = world_generator(seed, world_index)
        if randomizer.randomizes_model and model is given:
            model = copy.copy(model)  # draws go to the env's own model, not the caller's
        randomizer.draw_model(model, rng)
        data = mujoco.MjData(model)
        apply_initial_state(model, data, params, namespace)
        randomizer.perturb_state(model, data, rng)
        return cls(model, data, specs, randomizer, rng)


def reset_target(model: mujoco.MjModel, params: ParameterServer, namespace: str,
                 randomizer: Randomizer, rng: np.random.Generator, keyframe: int | str | None,
                 joint_positions: object, joint_velocities: object, keep_time: object,
                 seed: object = None) -> tuple[ResetTarget, np.random.Generator]:
    """Where a reset goes, and the generator from then on: the keyframe's index (-1: the initial
    state) and the whole qpos and qvel, the initial_joint_* parameters (no keyframe), the
    `randomize` state perturbation and the overrides applied; the `randomize` model terms are
    drawn here (Python's generator; `seed` seeds a new one). Everything is checked first, before
    anything changes: the overrides, the keyframe, the seed, the initial state (ConfigError)."""
    if not isinstance(keep_time, bool):
        raise ValueError(f"keep_time must be a bool, got {keep_time!r}")
    positions = joints.checked_joint_values(model, joint_positions, "positions")
    velocities = joints.checked_joint_values(model, joint_velocities, "velocities")
    key_id = -1 if keyframe is None else object_id(
        model, mujoco.mjtObj.mjOBJ_KEY, "keyframe", model.nkey, keyframe)
    checked = checked_seed(seed, "seed")
    target = mujoco.MjData(model)
    apply_initial_state(model, target, params, namespace)
    if checked is not None:
        rng = np.random.default_rng(checked)
    randomizer.draw_model(model, rng)  # from the nominal model, never compounded
    if key_id >= 0:
        mujoco.mj_resetDataKeyframe(model, target, key_id)
    randomizer.perturb_state(model, target, rng)
    joints.write_joint_values(target, positions, velocities)
    return (key_id, target.qpos.copy(), target.qvel.copy(), keep_time), rng


def warn_unread_parameters(params: ParameterServer, namespace: str, specs: Sequence[PluginSpec],
                           read: set[str]) -> None:
    """One warning per parameter directly in the env's namespace that nothing reads: not one the
    env reads (ENV_PARAMETERS), not a plugin's namespace, not read by a plugin while it loaded
    (a key dedented out of its plugin entry lands here). It names the closest plugin
    configuration key, or env parameter, if one is close."""
    try:
        tree = params.to_dict(namespace)
    except ValueError:  # the namespace holds a value, not parameters
        return
    owned = set(ENV_PARAMETERS) | {spec.name for spec in specs}
    no_plugins = params.search(namespace, "MujocoPlugins") is None
    for key, value in tree.items():
        name = resolve_name(key, namespace)
        if key in owned or any(seen == name or seen.startswith(name + "/")
                               or name.startswith(seen.rstrip("/") + "/") for seen in read):
            continue
        if namespace == "/" and isinstance(value, dict):
            continue  # at the root, a mapping is most likely another env's or tool's namespace
        if no_plugins and close_matches(key, ["MujocoPlugins"], cutoff=0.8):
            # A misspelt MujocoPlugins: the CLI says where it looked for the plugin list.
            continue
        _log.warning("parameter %s is not read by mjfast%s", name,
                     _closest_key_hint(key, specs))


def _closest_key_hint(key: str, specs: Sequence[PluginSpec]) -> str:
    """"; did you mean ..." naming the configuration key of a plugin (from its entry or its
    type's config_keys) or the env parameter closest to `key`, or ""."""
    candidates: list[tuple[str, str]] = []  # (key, where)
    for spec in specs:
        keys = set(spec.config)
        with contextlib.suppress(Exception):  # a type that does not resolve has no schema
            keys |= set(getattr(resolve_plugin(spec.type), "config_keys", None) or ())
        candidates += [(known, f"the key '{known}' of plugin '{spec.name}' ({spec.type})")
                       for known in sorted(keys)]
    candidates += [(known, f"the env parameter '{known}'") for known in ENV_PARAMETERS]
    for known, where in candidates:
        if known == key:
            return f"; did you mean {where}?"
    close = close_matches(key, [known for known, _ in candidates], n=1, cutoff=0.75)
    if close:
        where = next(where for known, where in candidates if known == close[0])
        return f"; did you mean {where}?"
    return ""
