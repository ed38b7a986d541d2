"""The ROS 2 interfaces that rosbags' Jazzy store lacks and SPEC §23 needs, registered into
mjfast's typestore from their definitions, shipped beside this module in `interfaces/`:

- control_msgs 5.8.0 (ros-controls/control_msgs, branch `jazzy`, commit f901df2): the actions
  FollowJointTrajectory and GripperCommand, and the messages they and
  JointTrajectoryControllerState use;
- action_msgs/srv/CancelGoal (ros2/rcl_interfaces 2.0.2, branch `jazzy`, commit 003987e).

An action's derived types are made as rosidl makes them (rosidl_parser's Action): `<A>_Goal`,
`<A>_Result`, `<A>_Feedback` from the `.action`'s three parts; the services `<A>_SendGoal`
(`goal_id`, `goal` -> `accepted`, `stamp`) and `<A>_GetResult` (`goal_id` -> `status`,
`result`) with their `_Request`, `_Response` and `_Event` messages; `<A>_FeedbackMessage`
(`goal_id`, `feedback`); and the action itself, whose fields name those. A service's own type
is the one ROS 2 hashes: `request_message`, `response_message`, `event_message`. rosbags parses
every part and computes the CDR and RIHS01 hashes; nothing here is hashed by hand. No Zenoh
import: the recorder uses the typestore too.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rosbags.typesys import get_types_from_msg
from rosbags.typesys.base import Nodetype

__all__ = ["ACTION_SUFFIXES", "INTERFACES", "action_types", "register_interfaces",
           "service_types"]

INTERFACES = Path(__file__).resolve().parent / "interfaces"

# The types rosidl derives from an action `<pkg>/action/<A>`, by suffix.
ACTION_SUFFIXES = ("_Goal", "_Result", "_Feedback", "_SendGoal_Request", "_SendGoal_Response",
                   "_SendGoal_Event", "_SendGoal", "_GetResult_Request", "_GetResult_Response",
                   "_GetResult_Event", "_GetResult", "_FeedbackMessage", "")

TypeDefs = dict[str, Any]


def _renamed(desc: Any, rename: Callable[[str], str]) -> Any:
    kind, rest = desc
    if kind == Nodetype.NAME:
        return (kind, rename(rest))
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return (kind, (_renamed(rest[0], rename), rest[1]))
    return desc


def _parse(text: str, name: str, own: set[str]) -> TypeDefs:
    """One part `<pkg>/<kind>/<Base>` of an interface, parsed by rosbags' msg parser. That parser
    names what it parses `<pkg>/msg/...` (`<pkg>/action/...` for action parts) and reads a bare
    type name as one of the part's own package and kind; here the part keeps `name`, a reference
    to one of the interface's own derived parts (`own`) gets the part's kind, and any other of the
    package is a `msg`, as rosidl reads a `.srv` or `.action` (GripperCommand.action's bare
    `GripperCommand` is control_msgs/msg/GripperCommand)."""
    package, kind, base = name.split("/")

    def rename(type_name: str) -> str:
        pkg, _, type_base = type_name.split("/")
        if pkg != package:
            return type_name
        return f"{pkg}/{kind}/{type_base}" if type_base in own else f"{pkg}/msg/{type_base}"

    parsed_name = f"{package}/{'action' if kind == 'action' else 'msg'}/{base}"
    parsed = get_types_from_msg(text, parsed_name)
    return {name if key == parsed_name else key:
            (consts, [(field, _renamed(desc, rename)) for field, desc in fields])
            for key, (consts, fields) in parsed.items()}


def _service_parts(prefix: str, base: str, request: str, response: str,
                   own: set[str]) -> TypeDefs:
    """A service's request, response, event and service types (`prefix` is `<pkg>/<kind>/`)."""
    types: TypeDefs = {}
    types.update(_parse(request, f"{prefix}{base}_Request", own))
    types.update(_parse(response, f"{prefix}{base}_Response", own))
    types.update(_parse(f"service_msgs/ServiceEventInfo info\n{base}_Request[<=1] request\n"
                        f"{base}_Response[<=1] response", f"{prefix}{base}_Event", own))
    types.update(_parse(f"{base}_Request request_message\n{base}_Response response_message\n"
                        f"{base}_Event event_message", f"{prefix}{base}", own))
    return types


def _split(text: str, parts: int, what: str) -> list[str]:
    lines = text.splitlines()
    cuts = [i for i, line in enumerate(lines) if line.strip() == "---"]
    if len(cuts) != parts - 1:
        raise ValueError(f"{what}: expected {parts} parts separated by '---', got "
                         f"{len(cuts) + 1}")
    bounds = [-1, *cuts, len(lines)]
    return ["\n".join(lines[a + 1:b]) for a, b in itertools.pairwise(bounds)]


def service_types(service_type: str, text: str) -> TypeDefs:
    """The types of `.srv` text for `<pkg>/srv/<S>`, as rosidl derives them."""
    package, _, base = service_type.split("/")
    request, response = _split(text, 2, service_type)
    own = {f"{base}{suffix}" for suffix in ("_Request", "_Response", "_Event")}
    return _service_parts(f"{package}/srv/", base, request, response, own)


def action_types(action_type: str, text: str) -> TypeDefs:
    """The types of `.action` text for `<pkg>/action/<A>`, as rosidl derives them."""
    package, _, base = action_type.split("/")
    goal, result, feedback = _split(text, 3, action_type)
    own = {f"{base}{suffix}" for suffix in ACTION_SUFFIXES if suffix}
    prefix = f"{package}/action/"
    types: TypeDefs = {}
    for part, body in (("_Goal", goal), ("_Result", result), ("_Feedback", feedback)):
        types.update(_parse(body, f"{prefix}{base}{part}", own))
    types.update(_service_parts(prefix, f"{base}_SendGoal",
                                f"unique_identifier_msgs/UUID goal_id\n{base}_Goal goal",
                                "bool accepted\nbuiltin_interfaces/Time stamp", own))
    types.update(_service_parts(prefix, f"{base}_GetResult",
                                "unique_identifier_msgs/UUID goal_id",
                                f"int8 status\n{base}_Result result", own))
    types.update(_parse(f"unique_identifier_msgs/UUID goal_id\n{base}_Feedback feedback",
                        f"{prefix}{base}_FeedbackMessage", own))
    types.update(_parse(f"{base}_Goal goal\n{base}_Result result\n{base}_Feedback feedback\n"
                        f"{base}_SendGoal send_goal_service\n"
                        f"{base}_GetResult get_result_service\n"
                        f"{base}_FeedbackMessage feedback_message", f"{prefix}{base}", own))
    return types


def register_interfaces(store: Any) -> None:
    """Registers every definition under `interfaces/` (messages first, which the others use)."""
    types: TypeDefs = {}
    for path in sorted(INTERFACES.glob("*/msg/*.msg")):
        types.update(get_types_from_msg(path.read_text(), f"{path.parts[-3]}/msg/{path.stem}"))
    store.register(types)
    types = {}
    for path in sorted(INTERFACES.glob("*/srv/*.srv")):
        types.update(service_types(f"{path.parts[-3]}/srv/{path.stem}", path.read_text()))
    for path in sorted(INTERFACES.glob("*/action/*.action")):
        types.update(action_types(f"{path.parts[-3]}/action/{path.stem}", path.read_text()))
    store.register(types)
