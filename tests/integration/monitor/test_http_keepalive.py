"""Back-to-back requests on one kept-alive connection to the real `vgpu monitor` (docs/metrics.md §1).

A reply written as two small segments (headers, then body) with Nagle's algorithm on waits for
the client's delayed ACK, about 40 ms per request on Linux; a scraper that reuses its connection
would see every scrape take that long.  The server writes each reply once, with TCP_NODELAY.
"""

from __future__ import annotations

import http.client
import statistics
import time

from tests.unit.monitor.helpers import UUIDS, add_container, parse, wait_until

from .conftest import create_pod

REQUESTS = 50
MEDIAN_LIMIT_S = 0.005


def timed_gets(conn: http.client.HTTPConnection, path: str, n: int) -> list[float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        times.append(time.perf_counter() - t0)
        assert r.status == 200, body
    return times


def test_back_to_back_requests_on_one_kept_alive_connection_do_not_stall(apiserver, start_monitor, hook):
    for i in range(3):
        pod = create_pod(apiserver, f"p{i}", gpus={"main": [UUIDS[0]]})
        add_container(hook, pod["metadata"]["uid"], "main", procs=[(1, [5, 0])])
    mon = start_monitor()
    wait_until(
        lambda: len({lab["pod"] for lab, _ in parse(mon.scrape()).get("hami_vgpu_memory_used_bytes", [])}) == 3,
        30,
        "the three containers' series",
    )
    conn = http.client.HTTPConnection("127.0.0.1", mon.port, timeout=10)
    try:
        conn.connect()
        metrics = timed_gets(conn, "/metrics", REQUESTS)
        health = timed_gets(conn, "/healthz", REQUESTS)
        sock = conn.sock
    finally:
        conn.close()
    assert sock is not None
    med_m, med_h = statistics.median(metrics), statistics.median(health)
    print(f"kept-alive medians: /metrics {med_m * 1e3:.2f} ms, /healthz {med_h * 1e3:.2f} ms")
    assert med_m < MEDIAN_LIMIT_S, f"/metrics median {med_m * 1e3:.1f} ms on a kept-alive connection"
    assert med_h < MEDIAN_LIMIT_S, f"/healthz median {med_h * 1e3:.1f} ms on a kept-alive connection"
