"""The DaemonSet's commands and environment match the real `vgpu` argument parsers.

Each container's ``command`` is parsed by ``vgpu.cli.build_parser()`` (an unknown flag fails),
and its environment is resolved by the subcommand's own ``resolve(args, environ)`` (flag > env >
default, docs/configuration.md §5).  Every variable the manifest sets must be one the subcommand reads
(proved by changing its value and seeing the resolved settings change or be rejected), or one of
the few that the NVIDIA container runtime, Python or the health checks read (listed below with
the reason).  The resolved paths must then line up with the volumes: the hook path and the
kubelet socket directory are hostPaths mounted at the same path, and the config files exist as
ConfigMap keys under the config mount.
"""

from __future__ import annotations

import importlib
import os
import pathlib
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

import pytest

from vgpu.cli import build_parser
from vgpu.kube.registrar import HandshakeMode
from vgpu.plugin.devices import ALL_KINDS

from . import manifests as m

# Variables not read by `vgpu` itself, and why they are set (docs/configuration.md §6).  The first
# two are needed everywhere; the MIG one only in the MIG overlay, next to CAP_SYS_ADMIN (the NVIDIA
# runtime refuses it without; test_security_context.py checks that pairing).
NEEDED_RUNTIME_ENV = {
    "NVIDIA_VISIBLE_DEVICES": "NVIDIA container runtime: expose every GPU (NVML access)",
    "NVIDIA_DRIVER_CAPABILITIES": "NVIDIA container runtime: inject the driver's NVML (utility)",
}
RUNTIME_ENV = {
    **NEEDED_RUNTIME_ENV,
    "NVIDIA_MIG_MONITOR_DEVICES": "NVIDIA container runtime: MIG instance access (MIG overlay only)",
}
SUBCOMMANDS = {"plugin": "vgpu.cli.plugin", "monitor": "vgpu.cli.monitor"}
NODE_NAME = "gpu-node-7"


def _argv(ctr: dict[str, Any]) -> list[str]:
    cmd = list(ctr.get("command", [])) + list(ctr.get("args", []))
    assert cmd and cmd[0] == "vgpu", f"container {ctr['name']} does not run the vgpu console script: {cmd}"
    return cmd[1:]


def _environ(ctr: dict[str, Any]) -> dict[str, str]:
    env = m.plain_env(ctr)
    refs = m.field_ref_env(ctr)
    assert refs == {"NODE_NAME": "spec.nodeName"}, f"{ctr['name']}: fieldRef env {refs}"
    env["NODE_NAME"] = NODE_NAME
    return env


def _resolve(sub: str, argv: list[str], environ: Mapping[str, str]) -> Any:
    module = importlib.import_module(SUBCOMMANDS[sub])
    args = build_parser().parse_args(argv)
    assert args.command == sub
    return module.resolve(args, dict(environ))


def _settings(options: Any) -> dict[str, Any]:
    return asdict(options) if hasattr(options, "__dataclass_fields__") else dict(vars(options))


def _probe_value(value: str) -> str:
    if value in ("auto", "on", "off"):
        return {"auto": "on", "on": "off", "off": "auto"}[value]
    return value + "-probe"


def _consumed(sub: str, argv: list[str], environ: dict[str, str], name: str) -> bool:
    """True when the subcommand reads ``name``: a different value changes the resolved settings
    (or is rejected by the resolver)."""
    before = _settings(_resolve(sub, argv, environ))
    changed = dict(environ, **{name: _probe_value(environ[name])})
    try:
        after = _settings(_resolve(sub, argv, changed))
    except (ValueError, SystemExit):
        return True
    return after != before


def _containers(kustomization: str = "base"):
    ds = m.daemonset(m.render(kustomization))
    return ds, {c["name"]: c for c in ds["spec"]["template"]["spec"]["containers"]}


def test_two_containers_from_one_image():
    ds, ctrs = _containers()
    assert sorted(ctrs) == ["monitor", "plugin"]
    assert ctrs["plugin"]["image"] == ctrs["monitor"]["image"]


@pytest.mark.parametrize("name", ["plugin", "monitor"])
def test_command_parses_with_the_real_parser(name):
    _, ctrs = _containers()
    argv = _argv(ctrs[name])
    args = build_parser().parse_args(argv)  # SystemExit on an unknown flag or subcommand
    assert args.command == name
    assert callable(args.func)


@pytest.mark.parametrize("kustomization", ["base", *m.OVERLAYS])
@pytest.mark.parametrize("name", ["plugin", "monitor"])
def test_every_env_var_is_read_by_the_subcommand_or_the_runtime(name, kustomization):
    _, ctrs = _containers(kustomization)
    ctr = ctrs[name]
    argv, environ = _argv(ctr), _environ(ctr)
    unknown = [v for v in environ if v not in RUNTIME_ENV and not _consumed(name, argv, environ, v)]
    assert not unknown, f"{name}: env vars that `vgpu {name}` ignores: {unknown}"
    assert set(NEEDED_RUNTIME_ENV) <= set(environ), f"{name}: NVML access needs {sorted(NEEDED_RUNTIME_ENV)}"


def test_plugin_settings_line_up_with_the_volumes():
    ds, ctrs = _containers()
    ctr = ctrs["plugin"]
    opts = _resolve("plugin", _argv(ctr), _environ(ctr))
    assert opts.node_name == NODE_NAME
    assert HandshakeMode.parse(opts.handshake) is HandshakeMode.AUTO
    assert not opts.kubeconfig, "the DaemonSet uses the in-cluster service account"
    # $HOOK_PATH: hostPath mounted at the SAME path (host paths are handed to workload containers).
    mount, vol = m.mount_for(ds, ctr, opts.hook_path)
    assert mount["mountPath"] == opts.hook_path == vol["hostPath"]["path"]
    assert vol["hostPath"]["type"] == "DirectoryOrCreate"
    # Kubelet socket directory: hostPath at the same path, our sockets go there.
    sock_dir = os.path.dirname(opts.kubelet_socket)
    mount, vol = m.mount_for(ds, ctr, opts.kubelet_socket)
    assert mount["mountPath"] == sock_dir == vol["hostPath"]["path"]
    assert vol["hostPath"]["type"] == "Directory"
    # /tmp/vgpulock: handed to every vGPU container as a host path (docs/hami-core.md §2.1).
    from vgpu.hamicore.paths import VGPULOCK_DIR

    mount, vol = m.mount_for(ds, ctr, VGPULOCK_DIR)
    assert vol["hostPath"]["path"] == mount["mountPath"] == VGPULOCK_DIR
    # Both config files come from the ConfigMaps through the projected /config volume.
    docs = m.single_file_docs()
    for path, cm, key in (
        (opts.device_config, "volcano-vgpu-device-config", "device-config.yaml"),
        (opts.node_config, "volcano-vgpu-node-config", "config.json"),
    ):
        mount, vol = m.mount_for(ds, ctr, path)
        assert mount.get("readOnly") is True
        sources = {s["configMap"]["name"]: s["configMap"] for s in vol["projected"]["sources"]}
        assert pathlib.PurePosixPath(path).relative_to(mount["mountPath"]).as_posix() == key
        assert key in m.configmap_data(docs, cm)
        assert sources[cm].get("optional") is True, "a missing ConfigMap means built-in defaults"


def test_monitor_settings_line_up_with_the_volumes_and_the_plugin():
    ds, ctrs = _containers()
    plugin = _resolve("plugin", _argv(ctrs["plugin"]), _environ(ctrs["plugin"]))
    ctr = ctrs["monitor"]
    opts = _settings(_resolve("monitor", _argv(ctr), _environ(ctr)))
    assert opts["node_name"] == NODE_NAME
    # One cache root for plugin and monitor (docs/decisions.md decision 5; upstream plugin#141).
    assert opts["hook_path"] == plugin.hook_path
    mount, vol = m.mount_for(ds, ctr, opts["hook_path"])
    assert mount["mountPath"] == opts["hook_path"] == vol["hostPath"]["path"]
    mount, vol = m.mount_for(ds, ctr, opts["device_config"])
    assert vol["configMap"]["name"] == "volcano-vgpu-device-config"
    assert (
        pathlib.PurePosixPath(opts["device_config"]).relative_to(mount["mountPath"]).as_posix() == "device-config.yaml"
    )
    # The monitor never needs the node config (docs/configuration.md §6).
    assert m.mount_for(ds, ctr, "/config/config.json")[1]["name"] == "device-config"


def test_plugin_probes_check_exactly_the_plugin_sockets():
    """Socket probes (chart value plugin.metrics.enabled false), or the endpoint's /livez and /healthz."""
    ds, ctrs = _containers()
    ctr = ctrs["plugin"]
    opts = _resolve("plugin", _argv(ctr), _environ(ctr))
    if "httpGet" in ctr["livenessProbe"]:
        port = int(m.plain_env(ctr)["VGPU_METRICS_LISTEN"].rsplit(":", 1)[1])
        assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {"plugin-metrics": port}
        assert (
            ctr["startupProbe"]["httpGet"]
            == ctr["livenessProbe"]["httpGet"]
            == {"path": "/livez", "port": "plugin-metrics"}
        )
        assert ctr["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "plugin-metrics"}
        return
    sock_dir = os.path.dirname(opts.kubelet_socket)
    expected = {f"{sock_dir}/{k.socket_name}" for k in ALL_KINDS}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        cmd = ctr[probe]["exec"]["command"]
        assert cmd[:2] == ["/bin/sh", "-c"], probe
        tested = {w for w in cmd[2].split() if w.startswith("/")}
        assert tested == expected, probe


def test_monitor_probes_and_port_match_the_listen_address():
    ds, ctrs = _containers()
    ctr = ctrs["monitor"]
    opts = _settings(_resolve("monitor", _argv(ctr), _environ(ctr)))
    listen = str(opts["listen"])
    port = int(listen.rsplit(":", 1)[1])
    ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
    assert ports == {"metrics": port} and port == 9394
    assert listen.rsplit(":", 1)[0] in ("0.0.0.0", "", "[::]"), "Prometheus scrapes the pod IP"
    for probe in ("readinessProbe", "livenessProbe"):
        assert ctr[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}


def test_volcano_1_15_overlay_turns_the_handshake_on_and_changes_nothing_else():
    _, base = _containers("base")
    _, old = _containers("overlays/volcano-1.15")
    b = _resolve("plugin", _argv(base["plugin"]), _environ(base["plugin"]))
    o = _resolve("plugin", _argv(old["plugin"]), _environ(old["plugin"]))
    assert HandshakeMode.parse(o.handshake) is HandshakeMode.ON
    assert {k: v for k, v in asdict(o).items() if k != "handshake"} == {
        k: v for k, v in asdict(b).items() if k != "handshake"
    }
    assert old["monitor"] == base["monitor"]
