"""The viser server under the browser viewer (SPEC §18, §22): exactly host:port, only the
viewer's own page, and nothing on the process's output.

viser offers no hook on its HTTP side, so this module installs one where viser hands its request
handler to `websockets`: while a server starts (one at a time, under a lock),
`websockets.asyncio.server.serve` is wrapped for that one call, and the handler it receives is
guarded. A launch whose hook did not take (a viser that serves otherwise) is refused rather than
served unguarded. The guard:

- refuses a websocket whose `Origin` is not the page's own (403): any other web page open in a
  browser on this machine could otherwise read the scene and press the buttons. No `Origin` (a
  client that is not a browser) is accepted. On a loopback address the `Host` must be a loopback
  name too, so a DNS name rebound to 127.0.0.1 is not the viewer's own either. A websocket that
  does not ask for this viser's subprotocol is refused too (viser would print the mismatch);
- serves viser's page with one script added at the top (`PAGE_SCRIPT`): a page that is left (a
  closed tab, a navigation, the back/forward cache) drops its connection at once.

viser prints a banner when it starts and a line when it stops, with rich's global console. The
server is built on a thread of its own and the viewer's event loop thread has rich's console in
capture mode from its first call: rich buffers per thread, so nothing reaches the process's
`sys.stdout`, and no other thread's output is touched.
"""

from __future__ import annotations

import errno
import gzip
import http
import ipaddress
import logging
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

import rich
import viser
import websockets.asyncio.server as ws_server
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

__all__ = ["PAGE_SCRIPT", "start_server", "stop_server"]

_log = logging.getLogger("mjfast.web")

# Added at the top of the page's <head>, before viser's own code runs. viser keeps its websocket
# in a worker; a page that Chromium moves into its back/forward cache keeps that worker, and so
# the connection, open (a navigated-away tab would go on costing the run its turns). On
# `pagehide` (closing, navigating, entering that cache) the page ends its workers, which closes
# their sockets at once; a page brought back from the cache loads afresh.
PAGE_SCRIPT = """<script>
(() => {
  const workers = new Set();
  const PageWorker = window.Worker;
  window.Worker = class extends PageWorker {
    constructor(...args) { super(...args); workers.add(this); }
  };
  window.addEventListener("pagehide", () => {
    for (const worker of workers) worker.terminate();
    workers.clear();
  });
  window.addEventListener("pageshow", (event) => { if (event.persisted) location.reload(); });
})();
</script>"""

_START_LOCK = threading.Lock()  # one server starts at a time: the hook wraps one serve() call
_REFUSAL_LOG_INTERVAL_S = 1.0
_LOOPBACK_NAMES = {"localhost"}
_SUBPROTOCOL = f"viser-v{viser.__version__}"  # what viser's page asks for, and viser checks


def _check_address(host: str, port: int) -> None:
    """OSError naming host:port when this machine cannot listen there (viser itself would try
    the next thousand ports, and wait forever when the host is not one of this machine's)."""
    where = f"cannot listen on {host}:{port}"
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as error:
        raise OSError(f"{where}: unknown host ({error.strerror})") from error
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will
        try:
            probe.bind(address)
        except OSError as error:
            reason = "the port is in use" if error.errno == errno.EADDRINUSE else error.strerror
            raise OSError(f"{where}: {reason}") from error


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Guard:
    """Wraps viser's request handler: the origin check and the page's script."""

    def __init__(self, inner: Callable[..., Any] | None, loopback: bool) -> None:
        self._inner = inner
        self._loopback = loopback
        self._page: tuple[bytes, bytes] | None = None  # (plain, gzipped), made once
        self._refused = 0
        self._next_log = 0.0

    def __call__(self, connection: Any, request: Request) -> Response | None:
        if request.headers.get("Upgrade", "").lower() == "websocket":
            reason = self.foreign(request)
            if reason is None:
                return None  # viser's own handshake
            self._log_refusal(reason)
            return connection.respond(http.HTTPStatus.FORBIDDEN,
                                      f"mjfast's browser viewer: {reason}\n")
        if self._inner is None:
            return None
        path = request.path.partition("?")[0]
        if path in ("/", "/index.html"):
            return self._page_response(connection, request)
        return self._inner(connection, request)

    def foreign(self, request: Request) -> str | None:
        """Why a websocket request does not come from the viewer's own page, or None."""
        protocols = ",".join(request.headers.get_all("Sec-WebSocket-Protocol"))
        if _SUBPROTOCOL not in (p.strip() for p in protocols.split(",")):
            # Not this viser's page (viser itself would print the mismatch on stdout).
            return (f"a websocket without the subprotocol {_SUBPROTOCOL!r} refused: only a page "
                    f"this server served may connect (reload the page)")
        origin = request.headers.get("Origin")
        if origin is None:
            return None  # not a browser: it could reach the port anyway
        host = request.headers.get("Host", "")
        own = {f"http://{host}".lower(), f"https://{host}".lower()}
        if origin.lower() not in own:
            return (f"a websocket from Origin {origin!r} refused: only the viewer's own page "
                    f"(http://{host}) may connect")
        hostname = urllib.parse.urlsplit(f"//{host}").hostname or ""
        if self._loopback and not _is_loopback(hostname):
            return (f"a websocket for host {host!r} refused: the viewer listens on loopback, "
                    f"and its page is reached by a loopback address")
        return None

    def _log_refusal(self, reason: str) -> None:
        self._refused += 1
        now = time.monotonic()
        if now >= self._next_log:
            self._next_log = now + _REFUSAL_LOG_INTERVAL_S
            _log.warning("%s (%d refused so far)", reason, self._refused)

    def _page_response(self, connection: Any, request: Request) -> Response | None:
        assert self._inner is not None
        if self._page is None:
            # viser's page, uncompressed, with the script added at the top of its <head>.
            plain = Request(request.path, Headers(
                (k, v) for k, v in request.headers.raw_items() if k.lower() != "accept-encoding"))
            response = self._inner(connection, plain)
            if response is None or response.status_code != http.HTTPStatus.OK:
                return response
            body = bytes(response.body)
            head = body.find(b"<head>")
            if head < 0:
                raise RuntimeError("viser's page has no <head>: the browser viewer cannot add "
                                   "its script to it")
            head += len(b"<head>")
            page = body[:head] + PAGE_SCRIPT.encode() + body[head:]
            self._page = (page, gzip.compress(page))
        use_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
        body = self._page[1] if use_gzip else self._page[0]
        return Response(http.HTTPStatus.OK, "OK", Headers({
            "Content-Type": "text/html; charset=utf-8",
            "Content-Length": str(len(body)),
            "Content-Encoding": "gzip" if use_gzip else "identity",
            "Cache-Control": "no-cache",
        }), body)


def start_server(host: str, port: int) -> viser.ViserServer:
    """A viser server on exactly host:port, guarded (see the module's docstring); OSError naming
    the address when it cannot listen there."""
    _check_address(host, port)
    original = ws_server.serve
    guards: list[_Guard] = []

    def serve(handler: Any, *args: Any, **kwargs: Any) -> Any:
        # viser's call, made on its event loop thread while the server starts.
        if not guards and "WebsockServer" in getattr(handler, "__qualname__", ""):
            rich.get_console().begin_capture()  # this thread's rich output: kept, never shown
            guards.append(_Guard(kwargs.get("process_request"), _is_loopback(host)))
            kwargs["process_request"] = guards[0]
        return original(handler, *args, **kwargs)

    built: list[viser.ViserServer] = []
    failed: list[BaseException] = []

    def build() -> None:
        console = rich.get_console()
        console.begin_capture()  # viser's banner: this thread only, and the thread ends here
        try:
            built.append(viser.ViserServer(host=host, port=port, verbose=False))
        except BaseException as error:
            failed.append(error)

    with _START_LOCK:
        ws_server.serve = serve
        try:
            builder = threading.Thread(target=build, name="mjfast-web-start", daemon=True)
            builder.start()
            builder.join()
        finally:
            ws_server.serve = original
    if failed:
        raise failed[0]
    server = built[0]
    if not guards:
        stop_server(server)
        raise RuntimeError(f"the browser viewer cannot guard viser {viser.__version__}'s server "
                           f"(its request handler was not found): not serving it unguarded")
    if port != 0 and server.get_port() != port:
        stop_server(server)
        raise OSError(f"cannot listen on {host}:{port}: the port is in use")
    return server


def stop_server(server: viser.ViserServer) -> None:
    server.stop()
