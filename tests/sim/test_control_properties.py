"""Hardening of `env.control.write` (SPEC §7, §12): any array, of any dtype, shape and values, is
either staged exactly as float64 or refused with a ValueError naming the field and its expected
shape, and a refused call stages nothing. Regression tests first, then a Hypothesis property run
against an env without and with an update_write plugin (they take different paths in the core)."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mjfast
from support import N_ARM_JOINTS, arm_xml

FIELDS = ("ctrl", "qfrc_applied", "xfrc_applied")


class Observer(mjfast.ControlPlugin):
    """Records the commands the physics thread applied, right before each mj_step; then clears
    them in the live data, so that accepted huge values do not make the simulation diverge (and
    so that what a step applies is told apart from what an earlier step left)."""

    created: ClassVar[list[Observer]] = []  # every instance, so that a test can find the env's one

    def __init__(self) -> None:
        self.applied: list[dict[str, np.ndarray]] = []
        Observer.created.append(self)

    def init(self, node, model, data):
        return True

    def cleanup(self):
        pass

    def pre_step(self, data):
        self.applied.append({field: getattr(data, field).copy() for field in FIELDS})
        for field in FIELDS:
            getattr(data, field)[:] = 0.0


class ObserverWithUpdateWrite(Observer):
    """The same, with an update_write that changes nothing: writes go through the plugin path."""

    def update_write(self, model, data):
        pass


@pytest.fixture(scope="module", params=[Observer, ObserverWithUpdateWrite])
def observed(request) -> Iterator[tuple[mjfast.MujocoEnv, Observer]]:
    """One arm env per plugin variant for the whole module, with its Observer instance."""
    type_name = f"test_control_properties/{request.param.__name__}"
    mjfast.register_plugin(type_name, request.param)
    Observer.created.clear()
    env = mjfast.MujocoEnv(arm_xml(), params={"MujocoPlugins": [{"type": type_name}]})
    try:
        (observer,) = Observer.created
        yield env, observer
    finally:
        env.close()
        mjfast.unregister_plugin(type_name)


def shapes(env: mjfast.MujocoEnv) -> dict[str, tuple[int, ...]]:
    model = env.model
    return {"ctrl": (model.nu,), "qfrc_applied": (model.nv,), "xfrc_applied": (model.nbody, 6)}


def shape_text(shape: tuple[int, ...]) -> str:
    return str(shape)


def known_commands(env: mjfast.MujocoEnv, offset: float) -> dict[str, np.ndarray]:
    """Distinct, modest commands for every field."""
    return {field: offset + np.arange(np.prod(shape), dtype=float).reshape(shape) / 100.0
            for field, shape in shapes(env).items()}


def applied_by_next_step(env: mjfast.MujocoEnv, observer: Observer) -> dict[str, np.ndarray]:
    before = len(observer.applied)
    env.step()
    assert len(observer.applied) == before + 1
    return observer.applied[-1]


def expected_outcome(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    """`value` as the float64 command it stages, or None if write() must refuse it."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError):
        return None
    if array.dtype.kind not in "iuf" or array.shape != shape:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(np.float64)
    return converted if np.all(np.isfinite(converted)) else None


def check_write(env: mjfast.MujocoEnv, observer: Observer, field: str, value: Any) -> None:
    """Writes `value` to `field` (with a valid second field), and checks what the next step
    applies: exactly `value` as float64, or, when refused, nothing of the call."""
    shape = shapes(env)[field]
    other = FIELDS[(FIELDS.index(field) + 1) % 3]
    third = FIELDS[(FIELDS.index(field) + 2) % 3]
    before = known_commands(env, 0.25)
    env.control.write(**before)
    np.testing.assert_array_equal(applied_by_next_step(env, observer)["ctrl"], before["ctrl"])
    companion = known_commands(env, -0.5)[other]
    expected = expected_outcome(value, shape)
    if expected is not None:
        env.control.write(**{field: value, other: companion})
        applied = applied_by_next_step(env, observer)
        np.testing.assert_array_equal(applied[field], expected)
        assert applied[field].tobytes() == expected.tobytes()  # bitwise, signed zeros included
        np.testing.assert_array_equal(applied[other], companion)
        return
    with pytest.raises(ValueError) as raised:
        env.control.write(**{field: value, other: companion})
    message = str(raised.value)
    assert message.startswith(f"{field}: ") and shape_text(shape) in message, message
    # Nothing of the refused call was staged: a later write of the third field alone applies the
    # commands from before, not the refused value nor its valid companion.
    probe = known_commands(env, 0.75)[third]
    env.control.write(**{third: probe})
    applied = applied_by_next_step(env, observer)
    np.testing.assert_array_equal(applied[field], before[field])
    np.testing.assert_array_equal(applied[other], before[other])
    np.testing.assert_array_equal(applied[third], probe)


# -- regressions ----------------------------------------------------------------------------------

REFUSED = [
    ("complex", lambda n: np.full(n, 0.5 + 1j), "dtype complex128"),
    ("complex with zero imaginary part", lambda n: np.full(n, 0.5 + 0j), "dtype complex128"),
    ("list of complex", lambda n: [0.5 + 0j] * n, "dtype complex128"),
    ("bool", lambda n: np.ones(n, dtype=bool), "dtype bool"),
    ("list of bool", lambda n: [True] * n, "dtype bool"),
    ("numeric strings", lambda n: np.array(["0.5"] * n), "dtype <U3"),
    ("list of numeric strings", lambda n: ["0.5"] * n, "dtype <U3"),
    ("bytes", lambda n: np.array([b"1"] * n), "dtype |S1"),
    ("object floats", lambda n: np.array([0.5] * n, dtype=object), "dtype object"),
    ("list of Decimal", lambda n: [Decimal("0.5")] * n, "dtype object"),
    ("ints beyond int64", lambda n: [2**70] * n, "dtype object"),
    ("datetime64", lambda n: np.zeros(n, dtype="datetime64[s]"), "dtype datetime64[s]"),
    ("timedelta64", lambda n: np.zeros(n, dtype="timedelta64[ms]"), "dtype timedelta64[ms]"),
    ("list of dates", lambda n: [datetime.date(2000, 1, 1)] * n, "dtype object"),
    ("structured", lambda n: np.zeros(n, dtype=[("x", float)]), "dtype [('x', '<f8')]"),
]


@pytest.mark.parametrize(("make", "fragment"), [(m, f) for _, m, f in REFUSED],
                         ids=[label for label, _, _ in REFUSED])
def test_a_value_that_is_not_real_numbers_is_refused(observed, make, fragment: str) -> None:
    env, observer = observed
    for field, shape in shapes(env).items():
        value = make(int(np.prod(shape)))
        if field == "xfrc_applied":
            value = np.asarray(value).reshape(shape)
        with pytest.raises(ValueError) as raised:
            env.control.write(**{field: value})
        message = str(raised.value)
        assert message.startswith(f"{field}: expected an array of real numbers"), message
        assert f"bool, complex, object, string and datetime dtypes are refused) of shape " \
               f"{shape}, got {fragment}; nothing was staged" in message, message
        check_write(env, observer, field, value)


@pytest.mark.parametrize("value", [
    np.full(N_ARM_JOINTS, 3, dtype=np.int8),
    np.full(N_ARM_JOINTS, 2**40, dtype=np.uint64),
    np.full(N_ARM_JOINTS, 0.1, dtype=np.float16),
    np.full(N_ARM_JOINTS, 0.1, dtype=np.float32),
    np.full(N_ARM_JOINTS, 0.1, dtype=np.longdouble),
    np.full(N_ARM_JOINTS, 0.1, dtype=">f8"),
    np.full((N_ARM_JOINTS, 2), 0.1)[:, 0],  # not contiguous
    [1] * N_ARM_JOINTS,
    [0.5, 1, 2, 3, 4, 5, 6],
], ids=["int8", "uint64", "float16", "float32", "longdouble", "big-endian", "strided",
        "list of int", "list of int and float"])
def test_integer_and_float_values_are_still_staged_as_float64(observed, value) -> None:
    env, observer = observed
    check_write(env, observer, "ctrl", value)


# -- property -------------------------------------------------------------------------------------

dtypes = st.one_of(
    hnp.floating_dtypes(sizes=(16, 32, 64)), st.just(np.dtype(np.longdouble)),
    hnp.integer_dtypes(), hnp.unsigned_integer_dtypes(), hnp.boolean_dtypes(),
    hnp.complex_number_dtypes(), hnp.datetime64_dtypes(), hnp.timedelta64_dtypes(),
    hnp.byte_string_dtypes(max_len=3), hnp.unicode_string_dtypes(max_len=3),
)


@st.composite
def commands(draw: st.DrawFn, shapes_by_field: dict[str, tuple[int, ...]]) -> tuple[str, Any]:
    """A field and a value for it: mostly arrays of the field's shape (any dtype, NaN and inf
    included), sometimes another shape, a list, or an object array."""
    field = draw(st.sampled_from(FIELDS))
    shape = shapes_by_field[field]
    if draw(st.sampled_from(range(4))):
        array_shape = shape
    else:
        array_shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=8))
    kind = draw(st.sampled_from(["array"] * 6 + ["list", "object"]))
    if kind == "array":
        return field, draw(hnp.arrays(draw(dtypes), array_shape))
    elements = st.one_of(st.floats(), st.integers(), st.booleans(),
                         st.complex_numbers(allow_nan=False, max_magnitude=1e3))
    size = int(np.prod(array_shape))
    flat = draw(st.lists(elements, min_size=size, max_size=size))
    if kind == "object":
        array = np.empty(size, dtype=object)
        array[:] = flat
        return field, array.reshape(array_shape)
    return field, np.asarray(flat, dtype=object).reshape(array_shape).tolist()


@settings(max_examples=150, deadline=None, database=None)
@given(data=st.data())
def test_any_array_is_staged_exactly_or_refused_staging_nothing(observed, data) -> None:
    env, observer = observed
    field, value = data.draw(commands(shapes(env)), label="command")
    check_write(env, observer, field, value)
