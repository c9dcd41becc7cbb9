"""The real daemons run with exactly the privileges the DaemonSet grants (docs/trust-model.md §4).

Each daemon is started as in its container: uid 0, every capability outside the grant dropped from
the bounding set (so the kernel leaves the process only the granted ones at exec), and
``no_new_privs`` (``allowPrivilegeEscalation: false``), with ``setpriv`` from util-linux:

- ``vgpu plugin`` with no capability at all serves a hami-core Allocate end to end and creates
  the host directories with their modes;
- ``vgpu monitor`` with none reads regions whose modes HAMi-core set, but not a region or a stale
  tree whose modes the workload tightened (the failure that makes DAC_OVERRIDE necessary); with
  DAC_OVERRIDE alone it reads that region and removes that tree (so it is sufficient).

Needs root and setpriv (a container's view of the host paths); elsewhere the test skips, and
fails under CI.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import uuid as uuidlib

import pytest

import tests.integration.volcano.conftest as volcano_conftest
from tests.conftest import missing_program
from tests.integration.monitor.conftest import create_pod
from tests.unit.monitor.helpers import UUIDS, add_container, container_dir, parse, set_old
from vgpu.hamicore import paths
from vgpu.sim.kubelet.admission import pod_manifest
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import MonitorProcess, wait_until

from .conftest import NODE

WORKLOAD_UID = 1000  # a non-root workload user (the file owner HAMi-core leaves)


def _setpriv(caps: list[str]) -> list[str]:
    """The prefix that runs a command as the container would: uid 0, only ``caps``, no_new_privs."""
    if os.geteuid() != 0:
        missing_program("running the daemons with a container's capability set needs root (setpriv)")
    path = shutil.which("setpriv")
    if path is None:
        missing_program("setpriv (util-linux) is not installed")
    bounding = ",".join(["-all", *(f"+{c.lower()}" for c in caps)])
    return [path, "--reuid=0", "--regid=0", "--clear-groups", f"--bounding-set={bounding}", "--inh-caps=-all",
            "--no-new-privs", "--"]  # fmt: skip


def _effective_caps(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError("no CapEff line")


CAP_DAC_OVERRIDE = 1


def test_plugin_serves_an_allocate_with_no_capability(monkeypatch, cluster_factory):
    prefix = _setpriv([])

    class Confined(volcano_conftest.PluginProcess):
        def start(self, *, append: bool = False):
            self.args = prefix + self.args
            return super().start(append=append)

    monkeypatch.setattr(volcano_conftest, "PluginProcess", Confined)
    cluster = cluster_factory()
    assert _effective_caps(cluster.plugin.pid) == 0, "the plugin must hold no capability"
    N = volcano_conftest.NUMBER
    cluster.create_pod(pod_manifest("p", [{"name": "c", "limits": {N: 1, volcano_conftest.MEMORY: 3000}}]))
    assert [o.node for o in cluster.scheduler("master").schedule_once()] == [NODE]
    res = cluster.admit("p")
    assert res.admitted, f"{res.error}\n{cluster.plugin.log()[-3000:]}"
    host_dir = res.container("c").mount("/tmp/vgpu").host_path
    assert stat.S_IMODE(os.stat(host_dir).st_mode) == paths.CONTAINER_DIR_MODE
    assert stat.S_IMODE(os.stat(cluster.hook_path / "containers").st_mode) == paths.CONTAINERS_ROOT_MODE
    assert stat.S_IMODE(os.stat(res.container("c").mount("/tmp/vgpulock").host_path).st_mode) == paths.VGPULOCK_MODE


@pytest.fixture
def monitor_env(tmp_path, apiserver):
    """(hook path, kubeconfig, fake NVML) for a monitor of this node."""
    hook = tmp_path / "hook"
    hook.mkdir()
    nvml = fakenvml.FakeNvml.create(
        tmp_path / "nvml", [fakenvml.device(0, uuid=UUIDS[0]), fakenvml.device(1, uuid=UUIDS[1])]
    )
    return hook, apiserver.kubeconfig(tmp_path / "kubeconfig"), nvml


@pytest.fixture
def confined_monitor(tmp_path, monitor_env):
    hook, kubeconfig, nvml = monitor_env
    started: list[MonitorProcess] = []

    def start(caps: list[str]) -> MonitorProcess:
        p = MonitorProcess(tmp_path, hook, kubeconfig, nvml_env=nvml.env, node_name=NODE)
        p.args = _setpriv(caps) + p.args
        started.append(p)
        p.start()
        assert _effective_caps(p.pid) == (1 << CAP_DAC_OVERRIDE if caps else 0)
        return p

    yield start
    for p in started:
        p.terminate()
        print(f"--- monitor log ({p.log_path}) ---\n{p.log()[-4000:]}")


def _workload_files(hook: pathlib.Path, apiserver) -> pathlib.Path:
    """Two running containers whose regions belong to the workload user — ``as-created`` as
    HAMi-core leaves it (0666), ``tightened`` chmod'ed 0600 by the workload — and the stale tree
    of a gone pod holding a 0500 directory of the workload user.  Returns the stale tree."""
    for name, mode in (("as-created", 0o666), ("tightened", 0o600)):
        pod = create_pod(apiserver, name, node=NODE, gpus={"main": list(UUIDS)})  # served: GPUs assigned
        path = add_container(hook, pod["metadata"]["uid"], "main", procs=[(7, [64])])
        os.chown(path, WORKLOAD_UID, WORKLOAD_UID)
        os.chmod(path, mode)
    gone = container_dir(hook, str(uuidlib.uuid4()), "main")
    deep = gone / "deep"
    deep.mkdir()
    (deep / "junk").write_bytes(b"x" * 4096)
    for p in (deep / "junk", deep):
        os.chown(p, WORKLOAD_UID, WORKLOAD_UID)
    os.chmod(deep, 0o500)
    set_old(gone, 3600)
    return gone


def _pods_reported(mon: MonitorProcess) -> set[str]:
    return {labels["pod"] for labels, _ in parse(mon.scrape()).get("hami_vgpu_memory_used_bytes", [])}


def test_monitor_needs_dac_override_for_files_a_workload_tightened(apiserver, monitor_env, confined_monitor):
    gone = _workload_files(monitor_env[0], apiserver)

    mon = confined_monitor([])
    wait_until(lambda: "as-created" in _pods_reported(mon), 30, "the 0666 region, read with no capability")
    wait_until(lambda: "cannot remove stale" in mon.log(), 30, "the first GC pass to fail", process=mon)
    assert "tightened" not in _pods_reported(mon), "root without DAC_OVERRIDE opened a 0600 file of uid 1000"
    assert (gone / "deep" / "junk").exists()
    mon.terminate()

    mon = confined_monitor(["DAC_OVERRIDE"])
    wait_until(lambda: {"as-created", "tightened"} <= _pods_reported(mon), 30, "both regions, with DAC_OVERRIDE")
    wait_until(lambda: not gone.exists(), 30, "the stale tree removed", process=mon)
