"""Pod matching under concurrency (docs/decisions.md decision 6; docs/failures.md A-1, A-4, A-6), end to end.

100 randomized trials: 2–4 pods whose first vGPU containers ask for different GPU counts, some
with a leading non-GPU container and a second vGPU container, are scheduled together (Volcano
master and v1.15 delivery alternate; ``vgpu-time`` ties are common) and then admitted by the
kubelet in a random order, resource order inside each container shuffled.  Every container must
get exactly the GPUs, memory limit and cache directory of its own segment.

The same trials also score upstream's rule, implemented here only as a comparison: at each
vgpu-number call, upstream takes the pod with the oldest ``vgpu-time`` on the node (plugin
≤ v1.10, "oldest-pod"), and plugin main additionally requires the pod's *total* remaining
device count to equal the request (PR #94).  Upstream also names the container by the segment
index in ``spec.containers``.
"""

from __future__ import annotations

import random
from typing import Any

from vgpu.protocol import decode_pod_devices, keys, vgpu_time_sort_key
from vgpu.sim.kubelet.admission import pod_manifest

from .conftest import CORES, MEMORY, NODE, NUMBER, a10

TRIALS = 100


def upstream_pick(pods: list[dict[str, Any]], n: int, with_count: bool) -> dict[str, Any] | None:
    """Upstream's choice for a vgpu-number Allocate of n devices (comparison only)."""
    best = None
    for p in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):  # LIST order
        ann = p["metadata"].get("annotations") or {}
        if ann.get(keys.VGPU_NODE) != NODE or ann.get(keys.BIND_PHASE) != "allocating":
            continue
        if with_count:
            try:
                total = sum(len(s) for s in decode_pod_devices(ann.get(keys.DEVICES_TO_ALLOCATE, "")))
            except ValueError:
                continue
            if total != n:
                continue
        if best is None or vgpu_time_sort_key(ann.get(keys.VGPU_TIME)) < vgpu_time_sort_key(
            best["metadata"]["annotations"].get(keys.VGPU_TIME)
        ):
            best = p
    return best


def _first_segment(pod: dict[str, Any]) -> int | None:
    segs = pod["metadata"]["annotations"][keys.DEVICES_TO_ALLOCATE].split(";")
    return next((i for i, s in enumerate(segs) if s), None)


def _upstream_container(pod: dict[str, Any]) -> str | None:
    """The container upstream would serve: spec.containers[k] for the first non-empty segment k."""
    k, ctrs = _first_segment(pod), pod["spec"]["containers"]
    return ctrs[k]["name"] if k is not None and k < len(ctrs) else None


def _actual_container(pod: dict[str, Any]) -> str | None:
    """The container the kubelet is admitting: the k-th container that requests vGPU."""
    k = _first_segment(pod)
    ctrs = [x for x in pod["spec"]["containers"] if NUMBER in (x.get("resources") or {}).get("limits", {})]
    return ctrs[k]["name"] if k is not None and k < len(ctrs) else None


def random_pod(rng: random.Random, name: str, first_count: int) -> dict[str, Any]:
    ctrs: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        ctrs.append({"name": "side", "env": {"CUDA_DISABLE_CONTROL": "true"}})
    ctrs.append(
        {
            "name": "g0",
            "limits": {NUMBER: first_count, MEMORY: rng.choice([1000, 2000, 4000]), CORES: rng.choice([0, 5, 10])},
        }
    )
    if rng.random() < 0.4:
        ctrs.append(
            {
                "name": "g1",
                "limits": {NUMBER: rng.randint(1, 2), MEMORY: rng.choice([1000, 3000]), CORES: rng.choice([0, 5])},
            }
        )
    return pod_manifest(name, ctrs)


def test_100_randomized_trials_all_matched_and_upstream_rule_compared(cluster_factory):
    c = cluster_factory([a10(i) for i in range(4)], seed=None)
    now = [1_784_884_863.0]
    scheds = {v: c.scheduler(v) for v in ("master", "v1.15")}
    for s in scheds.values():
        s.clock = lambda: now[0]
    score = {"ours": 0, "oldest": 0, "main": 0}
    calls = {"oldest": [0, 0, 0], "main": [0, 0, 0]}  # [right pod+container, right pod, total] per call
    for trial in range(TRIALS):
        rng = random.Random(1000 + trial)
        c.admitter.rng = random.Random(2000 + trial)
        sched = scheds["master" if trial % 2 == 0 else "v1.15"]
        k = rng.randint(2, 4)
        names = [f"t{trial}-{i}" for i in range(k)]
        for name, count in zip(names, rng.sample([1, 2, 3, 4], k), strict=True):
            c.create_pod(random_pod(rng, name, count))
            now[0] += rng.choice([0, 0, 1, 2])  # vgpu-time ties are frequent
            out = sched.schedule_once()
            assert [o.node for o in out if o.pod.endswith(name)] == [NODE], [o.reason for o in out]
        admitting: list[str] = [""]
        right = {"oldest": True, "main": True}

        def judge(
            res: str,
            avail: list[str],
            n: int,
            preferred: list[str] | None,
            *,
            admitting: list[str] = admitting,  # bound now: this trial's judge sees this trial's pods
            right: dict[str, bool] = right,
        ) -> list[str]:
            if res == NUMBER:
                pods = c.store.list("pods")
                me = c.pod(admitting[0])
                want = _actual_container(me)
                for rule, with_count in (("oldest", False), ("main", True)):
                    got = upstream_pick(pods, n, with_count)
                    pod_ok = got is not None and got["metadata"]["name"] == admitting[0]
                    ok = pod_ok and _upstream_container(got) == want
                    calls[rule][0] += ok
                    calls[rule][1] += pod_ok
                    calls[rule][2] += 1
                    right[rule] &= ok
            ids = preferred if preferred is not None and len(preferred) == n else avail[:n]
            return ids

        c.admitter.choose = judge
        order = list(names)
        rng.shuffle(order)
        for name in order:
            admitting[0] = name
            res = c.admit(name)
            assert res.admitted, (trial, name, res.error)
            pod = c.pod(name)
            ann = pod["metadata"]["annotations"]
            assert ann[keys.BIND_PHASE] == "success", (trial, name)
            segments = decode_pod_devices(ann[keys.VGPU_IDS_NEW])
            vgpu_ctrs = [x for x in pod["spec"]["containers"] if NUMBER in (x.get("resources") or {}).get("limits", {})]
            for ctr, seg in zip(vgpu_ctrs, segments, strict=False):
                got = res.container(ctr["name"])
                assert set(got.envs["NVIDIA_VISIBLE_DEVICES"].split(",")) == {d.uuid for d in seg}, (trial, name)
                assert got.envs["CUDA_DEVICE_MEMORY_LIMIT_0"] == f"{seg[0].usedmem}m"
                assert got.mount("/tmp/vgpu").host_path.endswith(f"/{pod['metadata']['uid']}_{ctr['name']}")
            for ctr in pod["spec"]["containers"]:
                if ctr not in vgpu_ctrs:
                    assert res.container(ctr["name"]).envs == {}
        score["ours"] += 1
        score["oldest"] += right["oldest"]
        score["main"] += right["main"]
        for name in names:
            c.store.delete("pods", "default", name)
            c.admitter.release(f"default/{name}")
    o, m = calls["oldest"], calls["main"]
    report = (
        f"randomized trials: ours {score['ours']}/{TRIALS}; upstream oldest-pod {score['oldest']}/{TRIALS} "
        f"trials ({o[0]}/{o[2]} vgpu-number calls right, {o[1]}/{o[2]} right pod); upstream main "
        f"(oldest + total count) {score['main']}/{TRIALS} trials ({m[0]}/{m[2]} calls right, "
        f"{m[1]}/{m[2]} right pod)"
    )
    print(report)
    assert score["ours"] == TRIALS
    assert score["oldest"] < TRIALS  # the race this design removes is real in these trials
