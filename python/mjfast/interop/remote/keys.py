"""The mapping between bus names and Zenoh key expressions (docs/remote.md documents it).

Owns the key layout of the remote bus: where a topic's messages, a remote publish, a service and
the server's own queries live under the `mjfast` prefix. It knows nothing of the encoding.
"""

from __future__ import annotations

import functools
from urllib.parse import quote, unquote

from mjfast.bus.params import resolve_name

__all__ = [
    "ALIVE",
    "LATEST",
    "PREFIX",
    "PUBLISH",
    "SERVICE",
    "SERVICES",
    "TOPIC",
    "TOPICS",
    "bus_name",
    "key",
]

PREFIX = "mjfast"
TOPIC = f"{PREFIX}/topic"  # every message published on the server's bus goes out here
PUBLISH = f"{PREFIX}/publish"  # a put here is published on the server's bus (then on TOPIC)
SERVICE = f"{PREFIX}/service"  # a query here calls the service; the reply is its result
SERVER = f"{PREFIX}/server"  # the server's own queries:
ALIVE = f"{SERVER}/alive"  # {"version", "namespace", "model"}: is a server there?
SERVICES = f"{SERVER}/services"  # sorted service names
TOPICS = f"{SERVER}/topics"  # sorted topic names (published or subscribed on the server)
LATEST = f"{SERVER}/latest"  # LATEST/<topic>: the topic's latest message, or None

# Characters that Zenoh gives a meaning in key expressions ('*', '$', '?', '#'), '@' (which
# starts Zenoh's verbatim chunks) and '%' itself are percent-encoded in a name's segments; every
# other character is kept, so ordinary names map to readable keys.
_SAFE = "".join(chr(c) for c in range(0x21, 0x7F) if chr(c) not in "%*$?#@/")


# Both directions are cached: every remote call and message maps a name, and the names in use
# are few.
@functools.lru_cache(maxsize=4096)
def key(area: str, name: str) -> str:
    """The Zenoh key of bus name `name` (absolute, or global when relative) in `area`."""
    absolute = resolve_name(name)
    if absolute == "/":
        raise ValueError(f"a topic or service name must not be empty, got {name!r}")
    return "/".join([area, *(quote(segment, safe=_SAFE) for segment in absolute[1:].split("/"))])


@functools.lru_cache(maxsize=4096)
def bus_name(area: str, key_expr: str) -> str:
    """The bus name that `key_expr` (a key under `area`) stands for."""
    text = str(key_expr)
    if not text.startswith(area + "/"):
        raise ValueError(f"key {text!r} is not under {area!r}")
    segments = [unquote(segment) for segment in text[len(area) + 1:].split("/")]
    for segment in segments:
        if "/" in segment:  # "%2F": one name would have two keys
            raise ValueError(f"key {text!r} encodes '/' inside a segment ({segment!r}); "
                             f"names map to keys segment by segment")
    return "/" + "/".join(segments)
