"""Remote access to an env's bus over Zenoh (SPEC §15): the server of `mjfast serve` and the
client of `mjfast.connect()`. Nothing else in mjfast imports this package, so `import mjfast`
works without the extra `mjfast[server]` (Zenoh, msgpack).
"""

from __future__ import annotations

from mjfast.interop.remote.client import Client, RemoteSubscription, connect
from mjfast.interop.remote.server import DEFAULT_ENDPOINT, BusServer

__all__ = ["DEFAULT_ENDPOINT", "BusServer", "Client", "RemoteSubscription", "connect"]
