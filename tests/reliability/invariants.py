"""The properties every fault must preserve (issue 11, "Done when").

- :func:`assert_no_unexplained_allocating`: no pod that reached Allocate is left with
  ``bind-phase=allocating`` unless a Warning Event on it says why.
- :func:`assert_own_allocation`: what the plugin handed a container belongs to that pod (its
  GPUs are the ones of the pod's own ``vgpu-ids-new`` segment, its cache directory carries the
  pod's UID) — never another pod's allocation.
- :func:`schedule_and_admit`: one pod through scheduler emulator and kubelet admission.
"""

from __future__ import annotations

from typing import Any

from vgpu.protocol import keys
from vgpu.sim.kubelet.admission import AdmissionResult, pod_manifest

NUMBER, MEMORY = "volcano.sh/vgpu-number", "volcano.sh/vgpu-memory"


def create_and_schedule(cluster: Any, name: str, gpus: int = 1, memory: int = 1000) -> None:
    cluster.create_pod(pod_manifest(name, [{"name": "c", "limits": {NUMBER: gpus, MEMORY: memory}}]))
    out = [o for o in cluster.scheduler("master").schedule_once() if o.pod.split("/")[-1] == name]
    assert out and out[0].scheduled, f"{name} not scheduled: {out}"


def schedule_and_admit(cluster: Any, name: str, gpus: int = 1, memory: int = 1000) -> AdmissionResult:
    create_and_schedule(cluster, name, gpus, memory)
    return cluster.admit(name)


def pod_events(cluster: Any, name: str, namespace: str = "default") -> list[dict[str, Any]]:
    return [
        e
        for e in cluster.store.list("events")
        if (e.get("involvedObject") or {}).get("name") == name
        and (e.get("involvedObject") or {}).get("namespace", namespace) == namespace
    ]


def bind_phase(cluster: Any, name: str) -> str | None:
    return cluster.annotations(name).get(keys.BIND_PHASE)


def assert_no_unexplained_allocating(cluster: Any, names: list[str]) -> None:
    for name in names:
        if bind_phase(cluster, name) == "allocating":
            warnings = [e for e in pod_events(cluster, name) if e.get("type") == "Warning"]
            assert warnings, f"pod {name} left bind-phase=allocating without an Event explaining why"


def assert_failed_with_event(cluster: Any, name: str) -> dict[str, Any]:
    assert bind_phase(cluster, name) == "failed", cluster.annotations(name)
    assert cluster.annotations(name)[keys.VGPU_TIME] == keys.VGPU_TIME_DONE
    evs = [e for e in pod_events(cluster, name) if e.get("reason") == "VGPUAllocationFailed"]
    assert evs and evs[0]["type"] == "Warning", pod_events(cluster, name)
    return evs[0]


def assert_own_allocation(cluster: Any, name: str, res: AdmissionResult) -> None:
    """The container's GPUs and cache directory are this pod's, from its own annotation."""
    assert res.admitted, res.error
    ann = cluster.annotations(name)
    uid = cluster.pod(name)["metadata"]["uid"]
    own = {rec.split(",")[0] for seg in ann[keys.VGPU_IDS_NEW].split(";") for rec in seg.split(":") if rec}
    c = res.container("c")
    visible = set(c.envs["NVIDIA_VISIBLE_DEVICES"].split(","))
    assert visible == own, f"{name} got {visible}, its annotation says {own}"
    cache = c.mount("/tmp/vgpu")
    assert cache is not None and cache.host_path.endswith(f"/containers/{uid}_c"), cache
    # The kubelet's device IDs are on the same GPUs (no other pod's fake IDs).
    assert {i.rsplit("-", 1)[0] for i in c.devices[NUMBER]} == own
    assert ann[keys.BIND_PHASE] == "success"


def delete_pod(cluster: Any, name: str) -> None:
    cluster.store.delete("pods", "default", name)
    cluster.admitter.release(f"default/{name}")
