"""A simulated Kubernetes API server on 127.0.0.1, good enough for the official Python client and kubectl.

Tests and ``vgpu demo`` run the real plugin, the scheduler emulator and kubectl against it:

    server = ApiServer().start()          # port=0 picks a free port
    server.kubeconfig(tmp_path / "kubeconfig")
    ...
    server.store.get("pods", "default", "p1")     # in-process access, no HTTP
    server.faults.fail("patch", "nodes", status=500, count=3)
    server.requests.write_counts()[("nodes", "patch")]
    server.stop()                          # ends open watches at once

The HTTP layer here only frames requests and responses (HTTP/1.1 keep-alive, chunked watch
streams of newline-delimited JSON); routing and semantics live in ``handlers`` and
``store``. ``stop()`` shuts every open connection, so clients see the server vanish
exactly like a crashed apiserver; ``start(port=same)`` brings it back with the same store.
"""

from __future__ import annotations

import logging
import pathlib
import select
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

from vgpu.sim.apiserver import errors
from vgpu.sim.apiserver.errors import ApiError
from vgpu.sim.apiserver.faults import FaultRule, Faults, RequestLog, RequestRecord
from vgpu.sim.apiserver.handlers import Handlers, Request, Response, route, verb_of
from vgpu.sim.apiserver.store import Store
from vgpu.sim.apiserver.watch import CLOSED, WatchEvent, dumps

log = logging.getLogger(__name__)

DEFAULT_VERSION = "v1.32.0"
_IDLE_POLL_S = 0.2  # how often an idle watch checks for a vanished client or a due bookmark


class _Abort(Exception):
    """End a connection without a proper HTTP ending (fault injection, vanished peer)."""


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # many clients (plugin, scheduler, kubectl, tests) connect at once

    def __init__(self, address: tuple[str, int], api: ApiServer):
        self.api = api
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conns_lock:
            self._conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_all_connections(self) -> None:
        with self._conns_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "vgpu-sim-apiserver"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in separate writes: without TCP_NODELAY, Nagle's algorithm and the
        # client's delayed ACK add ~40 ms to every response.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = do_GET

    # ------------------------------------------------------------ plumbing

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send(self, resp: Response) -> None:
        self.send_response(resp.code)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in resp.headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(resp.body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _peer_closed(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _reset(self) -> None:
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ------------------------------------------------------------ requests

    def _serve(self) -> None:
        api = self.server.api
        if api.stopping:
            self.close_connection = True
            return
        body = self._read_body()
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = Request.parse(self.command, self.path, headers, body)
        verb, resource, namespace, name = self.command.lower(), "", None, None
        try:
            r = route(req.path)
            verb = verb_of(self.command, r, req)
            resource, namespace, name = r.resource, r.namespace, r.name
            fault = api.faults.take(verb, resource, namespace, name)
            if fault is not None:
                if fault.delay:
                    api.stopping_event.wait(fault.delay)
                if fault.status == 0:
                    api._record(req, verb, resource, namespace, name, 0)
                    self._reset()
                    return
                if fault.status:
                    raise _fault_error(fault, resource, name)
            resp = api.handlers.handle(r, req, verb)
        except ApiError as exc:
            resp = Response(exc.code, dumps(exc.status()))
            if exc.retry_after is not None:
                resp.headers["Retry-After"] = str(exc.retry_after)
        except Exception as exc:  # a bug in the simulator must not kill the connection silently
            log.exception("simulated API server failed on %s %s", self.command, self.path)
            err = errors.internal(f"{type(exc).__name__}: {exc}")
            resp = Response(500, dumps(err.status()))
        api._record(req, verb, resource, namespace, name, resp.code)
        if resp.watcher is not None:
            self._stream(resp)
        else:
            self._send(resp)

    def _stream(self, resp: Response) -> None:
        api = self.server.api
        watcher = resp.watcher
        assert watcher is not None and resp.render_event is not None
        deadline = time.monotonic() + resp.timeout if resp.timeout else None
        last_bookmark = time.monotonic()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache, private")
            self.end_headers()
            while not api.stopping:
                wait = _IDLE_POLL_S
                if deadline is not None:
                    wait = max(0.0, min(wait, deadline - time.monotonic()))
                event = watcher.next(wait)
                if event is CLOSED:
                    if watcher.abrupt:
                        raise _Abort()
                    break
                if event is None:
                    now = time.monotonic()
                    if deadline is not None and now >= deadline:
                        break
                    if self._peer_closed():
                        raise _Abort()
                    if resp.bookmarks and now - last_bookmark >= api.bookmark_interval:
                        rv = api.store.bookmark(watcher)
                        if rv is not None:
                            self._chunk(resp.render_event(WatchEvent("BOOKMARK", rv=rv)))
                            last_bookmark = now
                    continue
                self._chunk(resp.render_event(event))
                if event.type == "ERROR":
                    break
            if api.stopping:
                raise _Abort()
            self.wfile.write(b"0\r\n\r\n")
        except (_Abort, OSError):
            self._reset()
        finally:
            api.store.unwatch(watcher)


def _fault_error(fault: FaultRule, resource: str, name: str | None) -> ApiError:
    code = int(fault.status or 500)
    qualified = resource or "resource"
    if fault.message is None:
        if code == 404:
            err = errors.not_found(qualified, name or "")
        elif code == 409:
            err = errors.conflict(qualified, name or "", errors.STALE)
        elif code == 410:
            err = errors.gone("too old resource version (injected)")
        elif code == 500:
            err = errors.internal("injected fault")
        elif code == 503:
            err = ApiError(503, "the server is currently unable to handle the request", "ServiceUnavailable")
        elif code == 429:
            err = ApiError(429, "Too many requests, please try again later.", "TooManyRequests")
        else:
            err = ApiError(code, f"injected fault ({code})")
    else:
        err = ApiError(code, fault.message)
    if fault.reason:
        err.reason = fault.reason
    err.retry_after = fault.retry_after
    return err


class ApiServer:
    """The simulated API server: a ``Store`` served over HTTP, with fault hooks and a request log.

    ``clock`` stamps creationTimestamps, events' ages and the request log, so tests with a
    simulated clock can reason in simulated time. ``bookmark_interval`` is how often an idle
    watch that allows bookmarks gets one (the real server: about a minute).
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        clock: Callable[[], float] = time.time,
        history_size: int = 5000,
        bookmark_interval: float = 1.0,
        graceful_pod_deletion: bool = False,
        kubernetes_version: str = DEFAULT_VERSION,
    ):
        self.store = store or Store(history_size=history_size, clock=clock, graceful_pod_deletion=graceful_pod_deletion)
        self.faults = Faults()
        self.requests = RequestLog(clock=self.store.clock)
        self.bookmark_interval = bookmark_interval
        self.stopping_event = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._host = "127.0.0.1"
        self._port = 0
        major, minor = kubernetes_version.lstrip("v").split(".")[:2]
        self.handlers = Handlers(
            self.store,
            version={
                "major": major,
                "minor": minor,
                "gitVersion": kubernetes_version,
                "gitCommit": "vgpu-sim",
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.23.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            },
            server_address=lambda: f"{self._host}:{self._port}",
        )

    # ------------------------------------------------------------ lifecycle

    def start(self, port: int = 0, host: str = "127.0.0.1") -> ApiServer:
        """Listen on ``host:port`` (0 = a free port) and serve in a background thread."""
        if self._httpd is not None:
            raise RuntimeError("the simulated API server is already running")
        self.stopping_event.clear()
        self._httpd = _HTTPServer((host, port), self)
        bound_host, self._port = self._httpd.server_address[:2]
        assert isinstance(bound_host, str)  # AF_INET: (host, port)
        self._host = bound_host
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"sim-apiserver:{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving: open watches end and every connection is closed at once. The store is kept."""
        httpd = self._httpd
        if httpd is None:
            return
        self.stopping_event.set()
        self.store.close_watches()
        httpd.shutdown()
        httpd.close_all_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ApiServer:
        return self if self._httpd is not None else self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._httpd is not None

    @property
    def stopping(self) -> bool:
        return self.stopping_event.is_set()

    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int:
        """The port (kept after stop(), so ``start(port=server.port)`` restarts in place)."""
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    # ------------------------------------------------------------ helpers for tests and the demo

    def kubeconfig(
        self, path: str | pathlib.Path, namespace: str = "default", context: str = "vgpu-sim"
    ) -> pathlib.Path:
        """Write a kubeconfig pointing at this server (for kubectl, the client, the plugin)."""
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "preferences": {},
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "vgpu-sim"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
            "current-context": context,
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path

    def client_configuration(self) -> Any:
        """A ``kubernetes.client.Configuration`` for this server."""
        from kubernetes import client

        cfg = client.Configuration()
        cfg.host = self.url
        return cfg

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` for this server (close it when done)."""
        from kubernetes import client

        return client.ApiClient(self.client_configuration())

    def drop_watches(self, abrupt: bool = False) -> int:
        """End every open watch now: cleanly (stream ends) or ``abrupt`` (connection reset)."""
        return self.store.close_watches(abrupt)

    def _record(
        self, req: Request, verb: str, resource: str, namespace: str | None, name: str | None, status: int
    ) -> None:
        self.requests.add(
            RequestRecord(
                time=self.store.clock(),
                monotonic=time.monotonic(),
                method=req.method,
                verb=verb,
                resource=resource,
                namespace=namespace,
                name=name,
                path=req.path,
                status=status,
                query=req.query_string,
                user_agent=req.headers.get("user-agent", ""),
                content_type=req.headers.get("content-type", ""),
                body=req.body if req.method in ("POST", "PUT", "PATCH", "DELETE") else b"",
            )
        )
