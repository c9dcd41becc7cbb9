"""The real monitor process against the simulated API server, the fake NVML and writer-made regions."""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from tests.unit.monitor.helpers import UUIDS
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.nvml import fakenvml
from vgpu.sim.pods import assignment_annotations, container_specs
from vgpu.sim.processes import MonitorProcess

NODE = "node-1"


@pytest.fixture
def kubeconfig(apiserver: ApiServer, tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "kubeconfig"
    apiserver.kubeconfig(path)
    return path


@pytest.fixture
def hook(tmp_path: pathlib.Path) -> pathlib.Path:
    h = tmp_path / "hook"
    h.mkdir()
    return h


@pytest.fixture
def nvml(tmp_path: pathlib.Path) -> fakenvml.FakeNvml:
    return fakenvml.FakeNvml.create(
        tmp_path / "nvml",
        [
            fakenvml.device(0, uuid=UUIDS[0], memory_used_mib=1000, utilization_gpu=40, utilization_memory=10),
            fakenvml.device(1, uuid=UUIDS[1], memory_used_mib=2000, utilization_gpu=60, utilization_memory=20),
        ],
    )


@pytest.fixture
def start_monitor(
    tmp_path: pathlib.Path, hook: pathlib.Path, kubeconfig: pathlib.Path, nvml: fakenvml.FakeNvml
) -> Iterator[Callable[..., MonitorProcess]]:
    started: list[MonitorProcess] = []

    def start(**kw: Any) -> MonitorProcess:
        kw.setdefault("nvml_env", nvml.env)
        p = MonitorProcess(tmp_path, hook, kubeconfig, **kw)
        started.append(p)
        return p.start()

    yield start
    for p in started:
        p.terminate()
        print(f"--- monitor log ({p.log_path}) ---\n{p.log()[-6000:]}")


def create_pod(
    apiserver: ApiServer,
    name: str,
    *,
    namespace: str = "default",
    containers: tuple[str, ...] = ("main",),
    node: str = NODE,
    labels: dict[str, str] | None = None,
    gpus: Mapping[str, Sequence[str]] | None = None,
    env: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, Any]:
    """A pod bound to ``node`` (running), as the API server stores it; returns it (with its uid).

    ``gpus`` (container → GPU UUIDs): a served vGPU pod, with limits, ``vgpu-ids-new`` and
    ``bind-phase=success`` as the scheduler and the plugin leave them; ``env``: literal env values."""
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = labels
    if gpus:
        meta["annotations"] = assignment_annotations(containers, gpus)
    apiserver.store.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {"nodeName": node, "containers": container_specs(containers, gpus, env)},
        },
        namespace,
    )
    return apiserver.store.patch(
        "pods", namespace, name, {"status": {"phase": "Running"}}, "merge", subresource="status"
    )


def set_phase(apiserver: ApiServer, pod: dict[str, Any], phase: str) -> None:
    meta = pod["metadata"]
    apiserver.store.patch(
        "pods", meta["namespace"], meta["name"], {"status": {"phase": phase}}, "merge", subresource="status"
    )
