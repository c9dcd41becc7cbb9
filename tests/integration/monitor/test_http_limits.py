"""The real `vgpu monitor`'s HTTP endpoint under idle, slow and excess connections (docs/metrics.md §1.1).

Any pod on the node can reach :9394: 300 connections that never send a request must neither
lock Prometheus out nor cost 300 threads, and a client that trickles its request in a byte at a
time is dropped after a few seconds.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

from tests.unit.monitor.helpers import add_container, parse, wait_until
from vgpu.httpserve import HEAD_TIMEOUT_S, MAX_CONNECTIONS

from .conftest import create_pod


def threads(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise AssertionError("no Threads: line")


def closed_by_peer(s: socket.socket) -> bool:
    s.settimeout(0.001)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def timed_scrape(mon) -> float:
    t0 = time.perf_counter()
    mon.scrape()
    return time.perf_counter() - t0


def test_300_idle_and_slow_connections_never_lock_a_scraper_out(apiserver, start_monitor, hook):
    add_container(hook, create_pod(apiserver, "p")["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    mon = start_monitor()
    base_threads = threads(mon.pid)
    stop = threading.Event()
    with contextlib.ExitStack() as stack:
        idle = [stack.enter_context(socket.create_connection(("127.0.0.1", mon.port), timeout=5)) for _ in range(300)]
        slow = [stack.enter_context(socket.create_connection(("127.0.0.1", mon.port), timeout=5)) for _ in range(30)]
        for s in slow:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")

        def drip() -> None:  # one more header byte per connection every 0.5 s, never a full request
            while not stop.wait(0.5):
                for s in slow:
                    with contextlib.suppress(OSError):
                        s.send(b"X")

        dripper = threading.Thread(target=drip, daemon=True)
        dripper.start()
        try:
            times = [timed_scrape(mon) for _ in range(5)]
            print(f"scrapes with 300 idle + 30 slow connections open: {[round(t * 1e3, 1) for t in times]} ms")
            assert max(times) < 1.0
            assert mon.get("/healthz")[0] == 200
            assert threads(mon.pid) <= base_threads + 2 * MAX_CONNECTIONS
            # every idle one made room for a later connection; the slow ones are cut at the head deadline
            wait_until(
                lambda: all(closed_by_peer(s) for s in idle + slow), HEAD_TIMEOUT_S + 5, "the server to drop them"
            )
        finally:
            stop.set()
            dripper.join(5)
    s = parse(mon.scrape())
    dropped = {lab["reason"]: v for lab, v in s["vgpu_monitor_http_connections_dropped_total"]}
    assert dropped["evicted"] + dropped["timeout"] >= 300
    assert s["vgpu_monitor_http_connections"][0][1] <= 2


def test_a_slowloris_request_is_dropped_after_the_head_timeout(apiserver, start_monitor):
    mon = start_monitor()
    with (
        socket.create_connection(("127.0.0.1", mon.port), timeout=5) as quiet,
        socket.create_connection(("127.0.0.1", mon.port), timeout=5) as trickle,
    ):
        t0 = time.monotonic()
        trickle.sendall(b"GET /metrics HTTP/1.1\r\nX-A: ")

        def both_closed() -> bool:
            if not closed_by_peer(trickle):
                with contextlib.suppress(OSError):
                    trickle.send(b"a")  # a byte per poll: a per-read timeout alone never fires
                return False
            return closed_by_peer(quiet)

        wait_until(both_closed, HEAD_TIMEOUT_S + 5, "both connections to be dropped", step=0.2)
        took = time.monotonic() - t0
    assert HEAD_TIMEOUT_S - 1 <= took <= HEAD_TIMEOUT_S + 5
    s = parse(mon.scrape())
    assert {lab["reason"]: v for lab, v in s["vgpu_monitor_http_connections_dropped_total"]}["timeout"] == 2
