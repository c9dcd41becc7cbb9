"""The HTTP endpoint: ``/metrics`` (text 0.0.4), ``/healthz``; every other path is 404 (docs/metrics.md §1).

A small ``ThreadingHTTPServer`` speaking HTTP/1.1 with keep-alive (Prometheus reuses its
connection, so a scrape costs no TCP handshake).  The body is never compressed: rendering is
cheap and gzip would cost more CPU than it saves on a node-local scrape.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from vgpu.monitor.exposition import CONTENT_TYPE

log = logging.getLogger(__name__)


class ListenAddressError(ValueError):
    """``--listen`` is not ``HOST:PORT``."""


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT``; an empty host means all IPv4 addresses)."""
    host, sep, port_text = value.rpartition(":")
    if not sep:
        raise ListenAddressError(f"--listen {value!r}: expected HOST:PORT, e.g. 0.0.0.0:9394")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ListenAddressError(f"--listen {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ListenAddressError(f"--listen {value!r}: port {port} is out of range 0-65535")
    return host or "0.0.0.0", port


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], metrics: Callable[[], bytes], health: Callable[[], tuple[bool, str]]):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.metrics = metrics
        self.health = health
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    timeout = 60  # an idle keep-alive connection is dropped after this

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
    """Serves ``metrics()`` and ``health()`` on ``listen`` in a background thread."""

    def __init__(self, listen: str, metrics: Callable[[], bytes], health: Callable[[], tuple[bool, str]]):
        self.address = parse_listen(listen)
        self._server = _Server(self.address, metrics, health)
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    def start(self) -> MetricsServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.5}, name="monitor-http", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()
