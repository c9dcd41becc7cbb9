"""The daemons' HTTP endpoint: ``/metrics`` (text 0.0.4), ``/healthz``, ``/livez``; every other path is 404.

Shared by `vgpu monitor` (``--listen``, docs/metrics.md §1) and `vgpu plugin`
(``--metrics-listen``, docs/metrics.md §10); neither daemon imports the other.

A small threaded ``http.server`` speaking HTTP/1.1 with keep-alive (Prometheus reuses its
connection, so a scrape costs no TCP handshake).  The body is never compressed: rendering is
cheap and gzip would cost more CPU than it saves on a node-local scrape.

The port is reachable from every pod on the node, so connections are bounded
(docs/metrics.md §1.1): at most ``MAX_CONNECTIONS`` are served at once, one thread each.  A
connection that is *waiting* (for its first request, or idle between keep-alive requests) gives
its slot up to a new connection when all are taken, oldest first, so idle or slow clients can
never lock a scraper out; when every slot is *busy* answering, a new connection gets a 503 and
is closed.  A request's line and headers must arrive within ``HEAD_TIMEOUT_S`` (from the
connection, or from the first byte of a keep-alive request), however slowly they trickle in; a
keep-alive connection may wait ``IDLE_TIMEOUT_S`` for its next request; a reply must be taken
within ``WRITE_TIMEOUT_S``.
"""

from __future__ import annotations

import io
import logging
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

MAX_CONNECTIONS = 32  # served at once (one thread each); waiting ones give way to new ones
HEAD_TIMEOUT_S = 5.0  # request line + headers, however slowly they come
IDLE_TIMEOUT_S = 60.0  # keep-alive: the wait for the next request
WRITE_TIMEOUT_S = 10.0  # the client must take the reply within this
LISTEN_BACKLOG = 128  # socketserver's default of 5 drops a burst of connects (SYN retries cost 1 s)
WAITING = "waiting"
BUSY = "busy"
_BUSY_BODY = b"too many concurrent requests; retry later\n"
_BUSY_REPLY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n".encode()
    + b"Retry-After: 1\r\nConnection: close\r\n\r\n"
    + _BUSY_BODY
)


class HttpStats(Protocol):
    """What the server counts (the monitor's ``MonitorStats`` has these fields; so has :class:`ServerStats`)."""

    lock: threading.Lock
    http_connections: int
    http_refused: int
    http_dropped: Counter[str]


@dataclass
class ServerStats:
    """The connection counters alone, for a daemon that does not export them."""

    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    http_connections: int = 0
    http_refused: int = 0
    http_dropped: Counter[str] = field(default_factory=lambda: Counter({"timeout": 0, "evicted": 0}))


class ListenAddressError(ValueError):
    """``--listen`` is not ``HOST:PORT``."""


def parse_listen(value: str, flag: str = "--listen") -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; an empty host means all IPv4 addresses); errors name ``flag``."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ListenAddressError(f"{flag} {value!r}: expected HOST:PORT, e.g. 0.0.0.0:9394")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ListenAddressError(f"{flag} {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ListenAddressError(f"{flag} {value!r}: port {port} is out of range 0-65535")
    return host or "0.0.0.0", port


@dataclass(eq=False)
class _Conn:
    """One accepted connection: what it is doing, since when (under the server's lock)."""

    sock: socket.socket
    phase: str = WAITING
    since: float = 0.0
    evicted: bool = False


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # stop() must not wait for clients that hold connections open
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self,
        address: tuple[str, int],
        metrics: Callable[[], bytes],
        health: Callable[[], tuple[bool, str]],
        stats: HttpStats,
        max_connections: int,
        name: str = "monitor",
    ):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.metrics = metrics
        self.health = health
        self.stats = stats
        self.max_connections = max_connections
        self.name = name
        self.conns: dict[int, _Conn] = {}
        self.conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Admit the connection (evicting the longest-waiting one when full) or refuse it with a 503."""
        now = time.monotonic()
        with self.conns_lock:
            admit = len(self.conns) < self.max_connections
            if not admit and len(self.conns) < 2 * self.max_connections:  # evicted ones still closing
                waiting = [c for c in self.conns.values() if c.phase == WAITING and not c.evicted]
                if waiting:
                    victim = min(waiting, key=lambda c: c.since)
                    victim.evicted = True
                    _shutdown(victim.sock)  # its blocked read returns at once; its thread ends
                    admit = True
            if admit:
                conn = _Conn(request, WAITING, now)
                self.conns[id(request)] = conn
            self._count_connections()
        if not admit:
            self._refuse(request)
            return
        t = threading.Thread(
            target=self._serve, args=(request, client_address), name=f"{self.name}-http-conn", daemon=True
        )
        try:
            t.start()
        except RuntimeError:  # cannot start a thread (resource limits): as if full
            with self.conns_lock:
                self.conns.pop(id(request), None)
                self._count_connections()
            self._refuse(request)

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - one connection's trouble is its own
            log.debug("HTTP connection from %s failed", client_address, exc_info=True)
        finally:
            with self.conns_lock:
                conn = self.conns.pop(id(request), None)
                self._count_connections()
            if conn is not None and conn.evicted:
                with self.stats.lock:
                    self.stats.http_dropped["evicted"] += 1
            self.shutdown_request(request)

    def _refuse(self, request: socket.socket) -> None:
        with self.stats.lock:
            self.stats.http_refused += 1
        try:
            request.setblocking(False)
            request.send(_BUSY_REPLY)  # fits any socket buffer: never blocks the accept loop
        except OSError:
            pass
        self.shutdown_request(request)

    def _count_connections(self) -> None:
        with self.stats.lock:
            self.stats.http_connections = len(self.conns)

    def set_phase(self, request: Any, phase: str) -> bool:
        """Mark a connection busy or waiting; False when it was evicted meanwhile."""
        with self.conns_lock:
            conn = self.conns.get(id(request))
            if conn is None or conn.evicted:
                return False
            conn.phase = phase
            conn.since = time.monotonic()
            return True


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _DeadlineReader(io.RawIOBase):
    """The connection's reads, each bounded by what is left of the handler's current deadline.

    A per-``recv`` timeout alone lets a client send one byte every few seconds forever.
    """

    def __init__(self, handler: _Handler):
        self._h = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        h = self._h
        left = h.deadline - time.monotonic()
        if left <= 0:
            h.timed_out()
            raise TimeoutError("the request did not arrive in time")
        sock = h.connection
        sock.settimeout(left)
        try:
            n = sock.recv_into(buffer)
        except TimeoutError:
            h.timed_out()
            raise
        if n and h.idle:  # the first byte of a keep-alive request: its head has HEAD_TIMEOUT_S from now
            h.idle = False
            h.deadline = time.monotonic() + HEAD_TIMEOUT_S
        return n


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = HEAD_TIMEOUT_S

    def setup(self) -> None:
        super().setup()
        self.deadline = time.monotonic() + HEAD_TIMEOUT_S
        self.idle = False
        self._timed_out = False
        self.rfile.close()  # the plain makefile() reader, replaced by a deadline-bound one
        self.rfile = io.BufferedReader(_DeadlineReader(self))

    def timed_out(self) -> None:
        if not self._timed_out:
            self._timed_out = True
            with self.server.stats.lock:
                self.server.stats.http_dropped["timeout"] += 1

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if not self.server.set_phase(self.request, BUSY):
            self.close_connection = True
            return False
        self.connection.settimeout(WRITE_TIMEOUT_S)
        return ok

    def handle_one_request(self) -> None:
        super().handle_one_request()
        if not self.close_connection:
            if not self.server.set_phase(self.request, WAITING):
                self.close_connection = True
            self.idle = True
            self.deadline = time.monotonic() + IDLE_TIMEOUT_S

    def do_GET(self) -> None:
        self._answer(send_body=True)

    def do_HEAD(self) -> None:
        self._answer(send_body=False)

    def _answer(self, send_body: bool) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            try:
                body = self.server.metrics()
            except Exception:  # noqa: BLE001 - a collector bug must not kill the endpoint
                log.exception("rendering /metrics failed")
                self._reply(500, b"internal error while collecting metrics\n", "text/plain; charset=utf-8", send_body)
                return
            self._reply(200, body, CONTENT_TYPE, send_body)
        elif path == "/healthz":
            ok, why = self.server.health()
            self._reply(200 if ok else 503, (why + "\n").encode(), "text/plain; charset=utf-8", send_body)
        elif path == "/livez":  # the process serves HTTP: the liveness and startup probes
            self._reply(200, b"ok\n", "text/plain; charset=utf-8", send_body)
        else:
            self._reply(404, b"not found; try /metrics\n", "text/plain; charset=utf-8", send_body)

    def _reply(self, status: int, body: bytes, ctype: str, send_body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if send_body:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)


class MetricsServer:
    """Serves ``metrics()`` and ``health()`` on ``listen`` in a background thread.

    ``name`` names its threads (``<name>-http``) and ``flag`` the setting in address errors.
    """

    def __init__(
        self,
        listen: str,
        metrics: Callable[[], bytes],
        health: Callable[[], tuple[bool, str]],
        *,
        stats: HttpStats | None = None,
        max_connections: int = MAX_CONNECTIONS,
        name: str = "monitor",
        flag: str = "--listen",
    ):
        self.address = parse_listen(listen, flag)
        self.stats: HttpStats = stats if stats is not None else ServerStats()
        self._server = _Server(self.address, metrics, health, self.stats, max_connections, name)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    def start(self) -> MetricsServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.5},
            name=f"{self._server.name}-http",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()
        with self._server.conns_lock:
            for conn in self._server.conns.values():
                _shutdown(conn.sock)  # their threads end at once
