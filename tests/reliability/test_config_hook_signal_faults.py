"""Corrupt/missing device config at start and on SIGHUP, an unusable $HOOK_PATH, SIGTERM during Allocate."""

from __future__ import annotations

import pathlib
import shutil
import signal
import tempfile
import threading

from tests.integration.plugin.conftest import PluginProcess
from tests.integration.volcano.conftest import NAMES
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml

from .invariants import (
    NUMBER,
    assert_failed_with_event,
    assert_no_unexplained_allocating,
    assert_own_allocation,
    bind_phase,
    create_and_schedule,
    pod_events,
    schedule_and_admit,
)
from .results import Stopwatch, poll, record

CORRUPT = "nvidia:\n  deviceSplitCount: [unclosed\n"


def test_corrupt_device_config_at_start_exits_2(tmp_path: pathlib.Path, apiserver):
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    sock = tempfile.mkdtemp(prefix="vgpu-rel-", dir="/tmp")
    kubelet = FakeKubelet(sock).start()
    try:
        p = PluginProcess(
            tmp_path, sock, nvml, device_config=CORRUPT, env={"KUBECONFIG": str(apiserver.kubeconfig(tmp_path / "kc"))}
        ).start()
        sw = Stopwatch()
        try:
            assert p.wait_exit(30) == 2
        finally:
            p.terminate()
        exit_s = sw.elapsed
        assert "device-config.yaml" in p.log(), p.log()[-2000:]
        assert kubelet.registrations == []
    finally:
        kubelet.stop()
        shutil.rmtree(sock, ignore_errors=True)
    record(
        "config-corrupt-start",
        "corrupt device config at start",
        f"clean exit 2 after {exit_s:.2f} s naming the file (documented, docs/configuration.md §2.3); "
        "nothing advertised",
        None,
        None,
        40,
    )


def test_missing_device_config_at_start_runs_with_defaults(cluster):
    # cluster_factory writes no device config: the plugin starts on the documented defaults.
    assert len(cluster.kubelet.plugin(NUMBER).healthy_ids()) == 20  # 2 GPUs × deviceSplitCount 10
    res = schedule_and_admit(cluster, "p")
    assert_own_allocation(cluster, "p", res)
    record(
        "config-missing-start",
        "device config missing at start",
        "runs on the defaults (deviceSplitCount 10, ...) and serves pods",
        None,
        None,
        41,
    )


def test_corrupt_and_missing_config_on_sighup(cluster_factory):
    c = cluster_factory(device_config="nvidia:\n  deviceSplitCount: 4\n")
    dc = c.plugin.log_path.parent / "device-config.yaml"
    assert len(c.kubelet.plugin(NUMBER).healthy_ids()) == 8
    dc.write_text(CORRUPT)
    c.plugin.proc.send_signal(signal.SIGHUP)
    assert c.plugin.wait_for_log("reload failed, keeping the previous configuration", 10)
    assert c.plugin.proc.poll() is None and len(c.kubelet.plugin(NUMBER).healthy_ids()) == 8
    res = schedule_and_admit(c, "after-corrupt")
    assert_own_allocation(c, "after-corrupt", res)
    dc.unlink()  # missing on reload
    c.plugin.proc.send_signal(signal.SIGHUP)
    poll(lambda: c.plugin.log().count("SIGHUP: reloading") >= 2, 10, "second reload")
    poll(lambda: c.kubelet.plugin(NUMBER) is not None and c.kubelet.plugin(NUMBER).updates, 10, "listing")
    missing_ids = len(c.kubelet.plugin(NUMBER).healthy_ids()) if c.kubelet.plugin(NUMBER) else 0
    assert c.plugin.proc.poll() is None
    # The fix: a valid file + SIGHUP → the new split is advertised.
    dc.write_text("nvidia:\n  deviceSplitCount: 5\n")
    sw = Stopwatch()
    c.plugin.proc.send_signal(signal.SIGHUP)
    # The reload keeps the registration: the open ListAndWatch streams carry the new lists.
    poll(
        lambda: c.kubelet.plugin(NUMBER) is not None and len(c.kubelet.plugin(NUMBER).healthy_ids()) == 10,
        10,
        "split 5 advertised after the fixed reload",
    )
    assert [r for r in c.kubelet.registrations if r.at >= sw.t0] == []
    recovery = sw.elapsed
    c.admitter.allocated.clear()  # the kubelet re-lists; held IDs of the old split are gone
    res = schedule_and_admit(c, "after-fix")
    assert res.admitted, res.error
    record(
        "config-reload",
        "corrupt, then missing device config on reload (SIGHUP)",
        "corrupt: reload refused, previous config kept, still serving; missing: "
        + ("previous split kept" if missing_ids == 8 else f"{missing_ids} IDs advertised (defaults)")
        + "; fixed file + SIGHUP applied in place, no re-registration (recovery = SIGHUP → new split listed)",
        recovery,
        10,
        42,
    )
    assert recovery <= 10


def test_hook_path_unwritable_when_allocate_creates_cache_dir(cluster):
    containers = cluster.hook_path / "containers"
    shutil.rmtree(containers, ignore_errors=True)
    containers.write_text("not a directory\n")  # mkdir under it fails (ENOTDIR) even as root
    create_and_schedule(cluster, "nohook")
    res = cluster.admit("nohook")
    assert not res.admitted and "UnexpectedAdmissionError" in (res.error or "")
    ev = assert_failed_with_event(cluster, "nohook")
    assert "containers" in ev["message"], ev["message"]
    assert cluster.plugin.proc.poll() is None
    containers.unlink()
    sw = Stopwatch()
    res = schedule_and_admit(cluster, "after")
    assert_own_allocation(cluster, "after", res)
    recovery = sw.elapsed
    record(
        "hook-unwritable",
        "$HOOK_PATH/containers unusable at Allocate (a file where the dir goes)",
        f"that pod fails with a Warning Event naming the path ({ev['message'][:70]}…) and bind-phase=failed; "
        "next pod served once fixed",
        recovery,
        5,
        50,
    )
    assert recovery <= 5


def test_sigterm_during_allocate(cluster, shared_cluster):
    # The fault is undone by what the test itself does last: the DaemonSet's restart of the plugin.
    c = cluster
    create_and_schedule(c, "inflight")
    rule = c.api.faults.delay(2.0, "patch", "pods", count=1)
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.setdefault("res", c.admit("inflight")))
    t.start()
    try:
        poll(lambda: rule.hits, 10, "the Allocate reached the API server")
        sw = Stopwatch()
        c.plugin.proc.send_signal(signal.SIGTERM)
        rc = c.plugin.wait_exit(20)
        exit_s = sw.elapsed
    finally:
        t.join(20)
    assert rc == 0
    assert not list(pathlib.Path(c.plugin.socket_dir).glob("nvidia-vgpu-*.sock"))  # sockets removed
    poll(lambda: bind_phase(c, "inflight") != "allocating" or pod_events(c, "inflight"), 10, "the pod settles")
    assert_no_unexplained_allocating(c, ["inflight"])
    phase = bind_phase(c, "inflight")
    # A new plugin process (the DaemonSet restart, same kubelet and node) serves the next pod.
    sw = Stopwatch()
    c.plugin = shared_cluster.restart_plugin()
    c.kubelet.wait_for_plugins(NAMES, timeout=15, since=sw.t0)
    res = schedule_and_admit(c, "next")
    assert_own_allocation(c, "next", res)
    recovery = sw.elapsed
    record(
        "sigterm-allocate",
        "SIGTERM during an Allocate",
        f"exit 0 after {exit_s:.2f} s with sockets removed; the in-flight pod ends {phase}; a restarted "
        "plugin serves the next pod (recovery = restart → next pod admitted)",
        recovery,
        15,
        60,
    )
    assert recovery <= 15
