"""Simulated API server: a pod LIST filtered by spec.nodeName against an unfiltered LIST.

5,000 pods on 50 nodes (100 per node). Both requests go over real HTTP on a kept-alive
connection and the client parses the JSON body, as the kubernetes client would. The
filtered LIST is served from the pods-by-node index (like the real cacher's index on
spec.nodeName), so it costs about the 100 matching pods, not the 5,000 stored ones.

Not a product hot path; it guards the property the plugin's pod cache relies on — that
a node-scoped LIST/WATCH stays cheap when the cluster is large.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator

import pytest

from benchmarks.conftest import ratio_gate, rounds
from vgpu.sim.apiserver import ApiServer

PODS, NODES = 5000, 50


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    server = ApiServer().start()
    try:
        for i in range(PODS):
            server.store.create(
                "pods",
                {
                    "metadata": {
                        "name": f"pod-{i:05d}",
                        "namespace": f"ns-{i % 20}",
                        "annotations": {"volcano.sh/vgpu-ids-new": "GPU-0,NVIDIA,3000,50:"},
                    },
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "cuda:12",
                                "resources": {"limits": {"volcano.sh/vgpu-number": "1"}},
                            }
                        ]
                    },
                },
            )
            server.store.bind(f"ns-{i % 20}", f"pod-{i:05d}", f"node-{i % NODES}")
        yield server
    finally:
        server.stop()


def test_node_filtered_list_vs_full_list(benchmark, server):
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30)

    def list_pods(query: str) -> list:
        conn.request("GET", "/api/v1/pods" + query)
        resp = conn.getresponse()
        body = resp.read()
        assert resp.status == 200
        return json.loads(body)["items"]

    filtered = lambda: list_pods("?fieldSelector=spec.nodeName%3Dnode-7")  # noqa: E731
    full = lambda: list_pods("")  # noqa: E731
    try:
        assert len(filtered()) == PODS // NODES
        assert len(full()) == PODS
        ratio_gate(
            benchmark,
            filtered,
            full,
            "apiserver.node_filtered_list",
            n=rounds(50),
            what="LIST pods spec.nodeName=node-7 (100 of 5,000) vs LIST all pods",
        )
    finally:
        conn.close()
