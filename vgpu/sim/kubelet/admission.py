"""Pod admission as the kubelet's device manager does it, over the fake kubelet's plugin clients.

The kubelet admits one pod at a time.  For each init container, then each app container in spec
order, and for each extended resource in the container's ``limits`` (in Go map order, i.e. an
unspecified order — here shuffled by ``rng`` unless a fixed order is asked for), it:

1. takes ``n = limits[resource]`` healthy, not yet allocated device IDs; if the plugin offers
   GetPreferredAllocation it asks for a preference first (and, like the kubelet, normally uses
   it); without enough IDs it rejects the pod itself (``Requested N, Available M``) and never
   calls the plugin;
2. calls ``Allocate`` with exactly those IDs; an error rejects the pod
   (``UnexpectedAdmissionError``) and frees what the pod held;
3. merges the responses of all resources of a container into the container's env, mounts,
   CDI devices (``cdi_devices``, the CRI ``CDIDevices``) and annotations, which the kubelet
   hands the runtime unchanged (a runtime with CDI resolves both, :mod:`vgpu.sim.cdi`).

Used by the Volcano end-to-end tests and the demo; it reports exactly what a container would get.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc

from vgpu.plugin.api import pb
from vgpu.sim.kubelet.device_manager import FakeKubelet, PluginClient


@dataclass
class ContainerResult:
    name: str
    init: bool
    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[pb.Mount] = field(default_factory=list)
    cdi_devices: list[str] = field(default_factory=list)
    """Fully qualified CDI names, in response order (CRI ``ContainerConfig.CDIDevices``)."""
    annotations: dict[str, str] = field(default_factory=dict)
    """Container annotations from the responses (``cdi.k8s.io/…`` for strategy cdi-annotations)."""
    devices: dict[str, list[str]] = field(default_factory=dict)
    """Resource name → the device IDs the kubelet allocated."""
    calls: list[str] = field(default_factory=list)
    """Resource names in the order Allocate was called."""

    def mount(self, container_path: str) -> pb.Mount | None:
        return next((m for m in self.mounts if m.container_path == container_path), None)


@dataclass
class AdmissionResult:
    pod: str
    containers: list[ContainerResult] = field(default_factory=list)
    error: str | None = None
    """``UnexpectedAdmissionError: …`` (plugin error) or the kubelet's own shortage message."""

    @property
    def admitted(self) -> bool:
        return self.error is None

    def container(self, name: str) -> ContainerResult:
        for c in self.containers:
            if c.name == name:
                return c
        raise KeyError(name)


def _quantity(value: Any) -> int:
    return int(str(value))


class Admitter:
    """Admits pods against the plugins registered with a :class:`FakeKubelet`.

    ``rng`` shuffles the resource order inside a container (None: the order of ``limits``).
    ``choose`` (optional) overrides the kubelet's ID choice: ``choose(resource, available, n,
    preferred) -> ids``; by default the kubelet takes the plugin's preference when it has one,
    else the first ``n`` available IDs.
    """

    def __init__(
        self,
        kubelet: FakeKubelet,
        *,
        rng: random.Random | None = None,
        choose: Callable[[str, list[str], int, list[str] | None], list[str]] | None = None,
    ):
        self.kubelet = kubelet
        self.rng = rng
        self.choose = choose
        self.allocated: dict[str, set[str]] = {}
        self._by_pod: dict[str, dict[str, set[str]]] = {}

    def _client(self, resource: str) -> PluginClient | None:
        return self.kubelet.plugin(resource)

    def available(self, resource: str) -> list[str]:
        c = self._client(resource)
        if c is None:
            return []
        taken = self.allocated.get(resource, set())
        return [i for i in c.healthy_ids() if i not in taken]

    def release(self, pod_key: str) -> None:
        """The pod ended: its devices go back to the pool."""
        for res, ids in self._by_pod.pop(pod_key, {}).items():
            self.allocated.get(res, set()).difference_update(ids)

    def admit(self, pod: Mapping[str, Any]) -> AdmissionResult:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        spec = pod.get("spec") or {}
        result = AdmissionResult(key)
        held: dict[str, set[str]] = {}
        ctrs = [(c, True) for c in spec.get("initContainers") or ()] + [
            (c, False) for c in spec.get("containers") or ()
        ]
        for c, init in ctrs:
            cr = ContainerResult(str(c.get("name", "")), init)
            result.containers.append(cr)
            limits = dict((c.get("resources") or {}).get("limits") or {})
            names = [r for r in limits if self._client(r) is not None]
            if self.rng is not None:
                self.rng.shuffle(names)
            for res in names:
                n = _quantity(limits[res])
                if n == 0:
                    continue
                err = self._allocate_one(res, n, cr, held)
                if err is not None:
                    result.error = err
                    for r, ids in held.items():
                        self.allocated.get(r, set()).difference_update(ids)
                    return result
        self._by_pod[key] = held
        return result

    def _allocate_one(self, res: str, n: int, cr: ContainerResult, held: dict[str, set[str]]) -> str | None:
        client = self._client(res)
        assert client is not None
        avail = self.available(res)
        if len(avail) < n:
            return (
                f"Allocate failed due to requested number of devices unavailable for {res}. "
                f"Requested: {n}, Available: {len(avail)}"
            )
        preferred: list[str] | None = None
        if client.options is not None and client.options.get_preferred_allocation_available:
            try:
                preferred = client.get_preferred_allocation(avail, [], n)
            except grpc.RpcError:
                preferred = None  # the kubelet ignores a failing preference
        if self.choose is not None:
            ids = self.choose(res, avail, n, preferred)
        elif preferred is not None and len(preferred) == n and set(preferred) <= set(avail):
            ids = preferred
        else:
            ids = avail[:n]
        try:
            resp = client.allocate([ids])
        except grpc.RpcError as exc:
            return f"UnexpectedAdmissionError: Allocate failed due to {exc.details()}, which is unexpected"
        cr.calls.append(res)
        cr.devices[res] = list(ids)
        self.allocated.setdefault(res, set()).update(ids)
        held.setdefault(res, set()).update(ids)
        for r in resp.container_responses:
            cr.envs.update(r.envs)
            cr.mounts.extend(r.mounts)
            cr.cdi_devices.extend(d.name for d in r.cdi_devices if d.name not in cr.cdi_devices)
            cr.annotations.update(r.annotations)
        return None


def node_status_from_kubelet(kubelet: FakeKubelet, resource_names: Iterable[str]) -> dict[str, str]:
    """What the kubelet would report as ``status.allocatable`` (and capacity) for our resources."""
    out = {}
    for name in resource_names:
        c = kubelet.plugin(name)
        out[name] = str(c.allocatable() if c is not None else 0)
    return out


def update_node_resources(store: Any, node_name: str, resources: Mapping[str, str]) -> dict[str, Any]:
    """Write capacity/allocatable into a simulated Node's status, as the kubelet's status loop does.

    A patch of the status subresource: no resourceVersion, so a concurrent annotation patch by the
    plugin cannot make it fail with a conflict."""
    patch = {"status": {"capacity": dict(resources), "allocatable": dict(resources)}}
    return store.patch("nodes", None, node_name, patch, subresource="status")


def pod_manifest(
    name: str,
    containers: Sequence[Mapping[str, Any]],
    *,
    namespace: str = "default",
    scheduler_name: str = "volcano",
    init_containers: Sequence[Mapping[str, Any]] = (),
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod for the scheduler emulator: ``containers`` are dicts with name, limits, env."""

    def ctr(c: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"name": c["name"], "image": c.get("image", "busybox")}
        if c.get("limits"):
            out["resources"] = {"limits": {k: str(v) for k, v in c["limits"].items()}}
        if c.get("env"):
            out["env"] = [{"name": k, "value": v} for k, v in c["env"].items()]
        return out

    spec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": [ctr(c) for c in containers]}
    if init_containers:
        spec["initContainers"] = [ctr(c) for c in init_containers]
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
