"""Shared helpers for the monitor tests: container directories with realistic regions, pods, parsing."""
from __future__ import annotations

import os
import pathlib
import re
import time
import uuid as uuidlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tests.unit.hamicore.scenario import MIB, NOW, UUIDS  # noqa: F401 - the monitor tests import them from here
from vgpu.sim.hamicore.writer import RegionWriter


def new_uid() -> str:
    return str(uuidlib.uuid4())


def container_dir(hook: pathlib.Path, uid: str, ctr: str) -> pathlib.Path:
    d = hook / "containers" / f"{uid}_{ctr}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_region(path: pathlib.Path, *, variant: str = "v1.2", uuids: Sequence[str] = UUIDS,
                 limits_mib: Sequence[int] = (3000, 2048), procs: Iterable[tuple[int, Sequence[int]]] = (),
                 sm_util: dict[tuple[int, int], int] | None = None, priority: int | None = None,
                 context_mib: dict[tuple[int, int], int] | None = None, now: int | None = NOW,
                 keep_open: bool = False) -> RegionWriter | pathlib.Path:
    """A region as libvgpu writes it: ``procs`` = [(pid, [MiB on d0, MiB on d1, ...])]."""
    env = {f"CUDA_DEVICE_MEMORY_LIMIT_{i}": f"{m}m" for i, m in enumerate(limits_mib)}
    if priority is not None:
        env["CUDA_TASK_PRIORITY"] = str(priority)
    w = RegionWriter.create(path, variant, env=env, now=now)
    w.init_devices(list(uuids))
    for pid, per_dev in procs:
        w.attach(pid, now=now)
        for d, mib in enumerate(per_dev):
            if context_mib and (pid, d) in context_mib:
                w.add_memory(pid, d, context_mib[(pid, d)] * MIB, "context")
            if mib:
                w.add_memory(pid, d, mib * MIB)
    for (pid, d), util in (sm_util or {}).items():
        w.set_monitor(pid, d, sm_util=util)
    if keep_open:
        return w
    w.close()
    return path


def add_container(hook: pathlib.Path, uid: str, ctr: str, name: str = "a.cache", **kw: Any) -> pathlib.Path:
    d = container_dir(hook, uid, ctr)
    write_region(d / name, **kw)
    return d / name


def pod(uid: str, name: str, *, namespace: str = "default", containers: Sequence[str] = ("main",),
        phase: str = "Running", node: str = "node-1", annotations: dict[str, str] | None = None,
        labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": "1"}
    if annotations:
        meta["annotations"] = annotations
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node, "containers": [{"name": c, "image": "busybox:1.36"} for c in containers]},
            "status": {"phase": phase}}


Samples = dict[str, list[tuple[dict[str, str], float]]]


def _parse_line(line: str) -> tuple[str, dict[str, str], float]:
    """A strict, character-level reader of one text-format sample line (independent of the code under test)."""
    i = 0
    while i < len(line) and line[i] not in "{ ":
        i += 1
    name, labels = line[:i], {}
    if i < len(line) and line[i] == "{":
        i += 1
        while line[i] != "}":
            eq = line.index("=", i)
            key = line[i:eq]
            assert line[eq + 1] == '"', line
            j, val = eq + 2, []
            while line[j] != '"':
                if line[j] == "\\":
                    j += 1
                    val.append({"n": "\n", "\\": "\\", '"': '"'}[line[j]])
                else:
                    val.append(line[j])
                j += 1
            assert key not in labels, f"duplicate label {key} in {line}"
            labels[key] = "".join(val)
            i = j + 1
            if line[i] == ",":
                i += 1
        i += 1
    assert line[i] == " ", line
    return name, labels, float(line[i + 1:])


def parse(body: bytes | str) -> Samples:
    """sample name -> [(labels, value)] (parsed, not compared as text); each sample under a TYPE."""
    text = body.decode() if isinstance(body, bytes) else body
    out: Samples = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
        if not line or line.startswith("#"):
            continue
        name, labels, value = _parse_line(line)
        assert any(name == t or name.startswith(t + "_") for t in typed), f"{name} has no TYPE line"
        out.setdefault(name, []).append((labels, value))
    return out


def headers(body: bytes | str) -> dict[str, tuple[str, str]]:
    """family name -> (TYPE, HELP) from the raw exposition."""
    text = body.decode() if isinstance(body, bytes) else body
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    return {name: (types[name], helps.get(name, "")) for name in types}


def one(samples: Samples, name: str, **labels: str) -> float:
    """The single sample of ``name`` whose labels include ``labels``."""
    hits = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} samples; have {samples.get(name)}"
    return hits[0]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def region_bytes(path: pathlib.Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def set_old(path: pathlib.Path | str, age_s: float, now: float | None = None) -> None:
    """Backdate an entry's own mtime (lstat) by ``age_s``."""
    t = (time.time() if now is None else now) - age_s
    os.utime(path, (t, t), follow_symlinks=False)
