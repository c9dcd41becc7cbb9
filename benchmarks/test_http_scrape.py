"""Scrapes of the real `vgpu monitor` over HTTP keep-alive at 10 / 100 / 1,000 containers.

The monitor process serves pods from the simulated API server and regions written by the region
writer (4 processes x 2 GPUs each).  A Prometheus-like client keeps one connection open and asks
for ``/metrics`` back to back, then ``/healthz``: the latency a scraper sees, socket, HTTP and
rendering included (the in-process scrape gates of test_monitor.py see none of the socket).  A
reply written in two segments with Nagle on would cost ~40 ms per request here; gates
``monitor.http_scrape_100`` (the issue-6 budget of 20 ms, over HTTP) and ``monitor.http_healthz``
(5 ms).  The rows go into the scaling table of docs/performance.md.
"""

from __future__ import annotations

import http.client
import statistics
import time

from benchmarks.conftest import QUICK, assert_gates, record_gate, rounds
from benchmarks.test_monitor import PROCS, UTIL, values
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.hamicore.scenario import UUIDS, add_container
from vgpu.sim.nvml import fakenvml
from vgpu.sim.pods import assignment_annotations, container_specs
from vgpu.sim.processes import MonitorProcess, wait_until

SIZES = (10, 100, 1000)


def _timed(conn: http.client.HTTPConnection, path: str, n: int) -> tuple[float, int]:
    times, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        times.append(time.perf_counter() - t0)
        assert r.status == 200, body
        size = len(body)
    return statistics.median(times), size


def test_keep_alive_scrapes_at_10_100_1000_containers(benchmark, tmp_path):
    api = ApiServer(bookmark_interval=60.0).start()
    fake = fakenvml.FakeNvml.create(
        tmp_path / "nvml", [fakenvml.device(0, uuid=UUIDS[0]), fakenvml.device(1, uuid=UUIDS[1])]
    )
    rows = []
    try:
        made = 0
        for size in SIZES:
            hook = tmp_path / f"hook{size}"
            hook.mkdir()
            for _ in range(size):
                made += 1
                obj = api.store.create(
                    "pods",
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "metadata": {
                            "name": f"p{made}",
                            "namespace": "default",
                            "annotations": assignment_annotations(["main"], {"main": UUIDS}),
                        },
                        "spec": {"nodeName": f"node-{size}", "containers": container_specs(["main"], {"main": UUIDS})},
                    },
                    "default",
                )
                add_container(hook, obj["metadata"]["uid"], "main", procs=PROCS, sm_util=UTIL)
            mon = MonitorProcess(
                tmp_path, hook, api.kubeconfig(tmp_path / "kubeconfig"), nvml_env=fake.env, node_name=f"node-{size}"
            )
            try:
                mon.start(timeout=120)
                wait_until(
                    lambda mon=mon, size=size: len(values(mon.scrape(), "hami_vgpu_memory_used_bytes")) == 2 * size,
                    120,
                    f"the monitor to track {size} containers",
                    process=mon,
                )
                conn = http.client.HTTPConnection("127.0.0.1", mon.port, timeout=30)
                try:
                    n = max(5, rounds(100) // (10 if size >= 1000 else 1)) if not QUICK else (5 if size >= 1000 else 10)
                    scrape, nbytes = _timed(conn, "/metrics", n)
                    health, _ = _timed(conn, "/healthz", rounds(100))
                finally:
                    conn.close()
            finally:
                mon.terminate()
            rows.append((size, scrape, health, nbytes))
            print(
                f"\n{size} containers: keep-alive scrape {scrape * 1e3:.2f} ms ({nbytes} bytes), "
                f"/healthz {health * 1e3:.2f} ms"
            )
    finally:
        api.stop()
    by = {size: (scrape, health, nbytes) for size, scrape, health, nbytes in rows}
    benchmark.pedantic(lambda: None, rounds=1, iterations=1)
    benchmark.extra_info["scaling"] = {
        "title": "Monitor scrape over HTTP keep-alive, real `vgpu monitor` process",
        "columns": ["Containers", "/metrics median", "Body", "/healthz median"],
        "rows": [[f"{s:,}", f"{sc * 1e3:.2f} ms", f"{nb / 1e3:.0f} kB", f"{h * 1e3:.2f} ms"] for s, sc, h, nb in rows],
    }
    a = record_gate("monitor.http_scrape_100", by[100][0] * 1e3, containers=100)
    b = record_gate("monitor.http_healthz", max(h for _, _, h, _ in rows) * 1e3)
    assert_gates(a, b)
