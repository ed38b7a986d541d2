"""The simulation-control bus services (SPEC §13): one service per bus row of the calls table
(`mjfast.sim.calls.SIM_CALLS`), under the env's namespace, taking and returning JSON-able dicts,
so that a remote client or the CLI can drive an env.

Each service checks its request against its row's fields (only those, and the required ones),
then lets the row answer: the env's own method called (which raises what it raises) and the
result made JSON-able. It holds the env weakly. It owns no call and no simulation logic
(`mjfast.sim.calls` and the env do).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mjfast.errors import LogicError
from mjfast.names import unknown
from mjfast.sim.calls import SimCall, bus_calls, cancellable, jsonable

if TYPE_CHECKING:
    from mjfast.bus.node import ServiceRegistration
    from mjfast.sim.env import MujocoEnv

__all__ = ["SERVICE_NAMES", "advertise_simulation_services", "cancellable", "jsonable"]

SERVICE_NAMES = tuple(call.name for call in bus_calls())


def _request(request: Any, service: str, call: SimCall) -> Mapping[str, Any]:
    """The request as a mapping with only the call's fields and every required one
    (ValueError)."""
    if request is None:
        request = {}
    if not isinstance(request, Mapping):
        raise ValueError(f"{service}: the request must be a dict (or None), got {request!r}")
    allowed = call.allowed
    for key in request:
        if key not in allowed:
            raise ValueError(unknown(f"{service}: unknown request field", key, allowed,
                                     exists="its fields are"))
    for key in call.required:
        if key not in request:
            raise ValueError(f"{service}: the request needs {key!r}")
    return request


def advertise_simulation_services(env: MujocoEnv) -> list[ServiceRegistration]:
    """Advertises every bus call as `<env namespace>/<name>` on env.bus (kept across reloads)."""
    reference = weakref.ref(env)  # the bus belongs to the env: no cycle through the handlers
    prefix = env.namespace.rstrip("/")
    registrations = []
    for call in bus_calls():
        service = f"{prefix}/{call.name}"

        def serve(request: Any, call: SimCall = call, service: str = service) -> dict[str, Any]:
            target = reference()
            if target is None:
                raise LogicError(f"{service}: the env is gone")
            return call.answer(target, _request(request, service, call))

        registrations.append(env.bus.advertise_service(service, serve))
    return registrations
