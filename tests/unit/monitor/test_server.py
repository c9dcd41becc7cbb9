"""The HTTP endpoint's connection bounds, in-process (docs/metrics.md §1.1)."""

from __future__ import annotations

import http.client
import socket
import threading

import pytest

from vgpu.httpserve import MetricsServer
from vgpu.monitor.stats import MonitorStats

from .helpers import wait_until


@pytest.fixture
def served():
    made = []

    def make(metrics=lambda: b"m 1\n", max_connections=2):
        stats = MonitorStats()
        srv = MetricsServer("127.0.0.1:0", metrics, lambda: (True, "ok"), stats=stats, max_connections=max_connections)
        made.append(srv.start())
        return srv, stats

    yield make
    for srv in made:
        srv.stop()


def get(port: int, path: str = "/metrics", timeout: float = 5) -> tuple[int, bytes]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def test_when_every_slot_is_busy_a_new_connection_gets_503_at_once(served):
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow_metrics() -> bytes:
        entered.release()
        release.wait(10)
        return b"m 1\n"

    srv, stats = served(slow_metrics, max_connections=2)
    results: list[int] = []
    busy = [threading.Thread(target=lambda: results.append(get(srv.port)[0])) for _ in range(2)]
    for t in busy:
        t.start()
    for _ in range(2):
        assert entered.acquire(timeout=5)
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as s:
            reply = s.recv(4096)
        assert reply.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in reply
        assert stats.http_refused == 1 and stats.http_connections == 2
    finally:
        release.set()
        for t in busy:
            t.join(5)
    assert results == [200, 200]
    wait_until(lambda: stats.http_connections == 0, 5, "the connections to close")


def test_a_waiting_connection_gives_its_slot_to_a_new_one(served):
    srv, stats = served(max_connections=2)
    with (
        socket.create_connection(("127.0.0.1", srv.port), timeout=5) as first,
        socket.create_connection(("127.0.0.1", srv.port), timeout=5) as second,
    ):
        wait_until(lambda: stats.http_connections == 2, 5, "two open connections")
        assert get(srv.port) == (200, b"m 1\n")
        assert first.recv(1) == b""  # the longest-waiting one was closed for it
        second.settimeout(0.05)
        with pytest.raises(TimeoutError):
            second.recv(1)
    assert stats.http_dropped["evicted"] == 1 and stats.http_refused == 0


def test_keep_alive_still_works(served):
    srv, _ = served()
    c = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
    try:
        for _ in range(3):
            c.request("GET", "/healthz")
            r = c.getresponse()
            assert (r.status, r.read()) == (200, b"ok\n")
        c.request("GET", "/nope")
        assert c.getresponse().status == 404
    finally:
        c.close()


def test_stop_does_not_wait_for_clients_holding_connections(served):
    import time

    srv, stats = served(max_connections=4)
    socks = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(3)]
    try:
        wait_until(lambda: stats.http_connections == 3, 5, "three open connections")
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 2
        for s in socks:
            assert s.recv(1) == b""
    finally:
        for s in socks:
            s.close()
