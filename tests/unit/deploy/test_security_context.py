"""Each container's privileges, exactly, in the base and in every overlay (docs/trust-model.md §4).

The table below is the whole grant: a field added, dropped or widened in a manifest fails here
and must be argued for in docs/trust-model.md.  The rules the NVIDIA container runtime and the
API server apply are checked too: ``NVIDIA_MIG_*_DEVICES`` only in a container that holds
CAP_SYS_ADMIN (the runtime refuses to start it otherwise), and a privileged container cannot
have ``allowPrivilegeEscalation: false``.  With a read-only root filesystem the only writable
paths are the declared ones, and each container's ``/tmp`` is its own emptyDir.
"""

from __future__ import annotations

from typing import Any

import pytest

from . import manifests as m

RUNTIME_DEFAULT = {"type": "RuntimeDefault"}

# The least-privilege contexts of the base (hami-core mode on every node).
PLUGIN = {
    "privileged": False,
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": RUNTIME_DEFAULT,
}
MONITOR = {
    "privileged": False,
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE"]},
    "seccompProfile": RUNTIME_DEFAULT,
}
# Dynamic MIG (deploy/overlays/mig/daemonset-patch.yaml): the plugin reconfigures GPUs.
MIG_PLUGIN = {
    "privileged": True,
    "runAsUser": 0,
    "runAsNonRoot": False,
    "allowPrivilegeEscalation": True,
    "readOnlyRootFilesystem": True,
    "seccompProfile": {"type": "Unconfined"},
}
MIG_MONITOR = {
    **MONITOR,
    "capabilities": {"drop": ["ALL"], "add": ["DAC_OVERRIDE", "SYS_ADMIN"]},
}
EXPECTED = {
    "base": {"plugin": PLUGIN, "monitor": MONITOR},
    "overlays/volcano-1.15": {"plugin": PLUGIN, "monitor": MONITOR},
    "overlays/mig": {"plugin": MIG_PLUGIN, "monitor": MIG_MONITOR},
}
# Writable mounts (host paths and emptyDirs), by container; everything else is read-only.
WRITABLE = {
    "plugin": {"/var/lib/kubelet/device-plugins", "/usr/local/vgpu", "/tmp", "/tmp/vgpulock"},
    "monitor": {"/usr/local/vgpu", "/tmp"},
}
MIG_ENV = ("NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES")


def _containers(kustomization: str) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    ds = m.daemonset(m.render(kustomization))
    return ds, {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}


def _sys_admin(sc: dict[str, Any]) -> bool:
    caps = (sc.get("capabilities") or {}).get("add") or []
    return sc.get("privileged") is True or any(c.removeprefix("CAP_") == "SYS_ADMIN" for c in caps)


def test_every_kustomization_is_covered():
    assert set(EXPECTED) == {"base", *m.OVERLAYS}


@pytest.mark.parametrize("kustomization", sorted(EXPECTED))
def test_security_contexts_are_exactly_the_documented_ones(kustomization):
    ds, ctrs = _containers(kustomization)
    assert sorted(ctrs) == ["monitor", "plugin"]
    for name, want in EXPECTED[kustomization].items():
        assert ctrs[name]["securityContext"] == want, f"{kustomization}: {name}"
    pod = ds["spec"]["template"]["spec"]
    assert not pod.get("initContainers")
    for key in ("hostPID", "hostIPC", "hostNetwork", "shareProcessNamespace"):
        assert not pod.get(key), f"{kustomization}: {key}"
    assert "securityContext" not in pod or not pod["securityContext"], "per container, not pod-wide"


def test_only_the_mig_overlay_is_privileged_or_holds_sys_admin():
    for kustomization in EXPECTED:
        _, ctrs = _containers(kustomization)
        holders = sorted(n for n, c in ctrs.items() if _sys_admin(c["securityContext"]))
        assert holders == (["monitor", "plugin"] if kustomization == "overlays/mig" else []), kustomization


@pytest.mark.parametrize("kustomization", sorted(EXPECTED))
def test_the_runtime_and_api_server_rules_hold(kustomization):
    _, ctrs = _containers(kustomization)
    for name, ctr in ctrs.items():
        sc = ctr["securityContext"]
        env = {e["name"] for e in ctr.get("env", [])}
        # nvidia-container-runtime-hook: "cannot set MIG_MONITOR_DEVICES in non privileged container"
        # (privileged there means CAP_SYS_ADMIN in the bounding set).
        if env & set(MIG_ENV):
            assert _sys_admin(sc), f"{kustomization}: {name} sets {sorted(env & set(MIG_ENV))} without CAP_SYS_ADMIN"
        if sc.get("privileged"):
            assert sc.get("allowPrivilegeEscalation") is not False
        assert {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES"} <= env, "NVML through the NVIDIA runtime"
    if kustomization == "overlays/mig":
        for ctr in ctrs.values():
            assert {e["name"]: e["value"] for e in ctr["env"] if e["name"] in MIG_ENV} == {
                "NVIDIA_MIG_MONITOR_DEVICES": "all"
            }


@pytest.mark.parametrize("kustomization", sorted(EXPECTED))
def test_writable_paths_are_the_declared_ones(kustomization):
    ds, ctrs = _containers(kustomization)
    tmp_volumes = set()
    for name, ctr in ctrs.items():
        assert ctr["securityContext"]["readOnlyRootFilesystem"] is True
        writable = set()
        for mount in ctr["volumeMounts"]:
            vol = m.volume(ds, mount["name"])
            if mount.get("readOnly"):
                continue
            assert "configMap" not in vol and "projected" not in vol, f"{name}: config mounted writable"
            writable.add(mount["mountPath"])
        assert writable == WRITABLE[name], f"{kustomization}: {name}"
        mount, vol = m.mount_for(ds, ctr, "/tmp/x")
        assert mount["mountPath"] == "/tmp" and "emptyDir" in vol, f"{name}: /tmp must be an emptyDir"
        tmp_volumes.add(mount["name"])
    assert len(tmp_volumes) == 2, "each container has its own /tmp: they share no scratch space"
