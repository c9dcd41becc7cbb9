"""`--log-format json` on the real plugin process: every line is one JSON object, and the Allocate
lines carry the pod and the container as keys (docs/troubleshooting.md §4)."""

from __future__ import annotations

import json

from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import MEMORY, NUMBER


def test_plugin_json_log_lines_carry_pod_and_container(cluster_factory):
    cluster = cluster_factory(env={"VGPU_LOG_FORMAT": "json", "VGPU_LOG_LEVEL": "info"})
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {NUMBER: 1, MEMORY: 2000}}]))
    cluster.create_pod(
        pod_manifest(
            "refused",
            [{"name": "main", "limits": {NUMBER: 1, MEMORY: 1000}}],
            init_containers=[{"name": "warmup", "limits": {NUMBER: 1, MEMORY: 1000}}],
        )
    )
    sched = cluster.scheduler("master")
    sched.schedule_once()
    assert cluster.admit("p").admitted
    assert not cluster.admit("refused").admitted
    assert cluster.plugin.wait_for_log('"pod": "default/refused"', 10)
    docs = [json.loads(line) for line in cluster.plugin.log().splitlines() if line.strip()]
    assert all({"timestamp", "level", "logger", "message"} <= set(d) for d in docs)
    served = [d for d in docs if d.get("pod") == "default/p" and d.get("container") == "c"]
    assert served and served[0]["level"] == "INFO" and served[0]["message"].startswith("pod default/p container c:")
    failed = [d for d in docs if d.get("pod") == "default/refused" and d["level"] == "WARNING"]
    assert failed and "init containers requesting vGPU are not supported" in failed[0]["message"]
