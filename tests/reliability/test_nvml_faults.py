"""NVML faults: nvmlInit failing at start, a GPU lost (XID 79), NVML calls that hang (docs/health.md §6, §4)."""

from __future__ import annotations

import pathlib
import shutil
import tempfile
import time

from tests.integration.plugin.conftest import PluginProcess
from vgpu.monitor.host import DEFAULT_BOUND_S as NVML_BOUND_S
from vgpu.protocol import keys
from vgpu.sim.kubelet import FakeKubelet
from vgpu.sim.nvml import fakenvml
from vgpu.sim.processes import MonitorProcess

from .invariants import NUMBER, assert_failed_with_event, assert_own_allocation, create_and_schedule, schedule_and_admit
from .nvmlhang import NvmlHang
from .results import Stopwatch, poll, record

NVML_ERROR_DRIVER_NOT_LOADED = 9
NAMES = ("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")
# The monitor waits NVML_BOUND_S for a fresh NVML sample (a constant of the product, no flag):
# a few bounds of scrapes during the hang show the first one bounded and the later ones not waiting.
OBSERVE_HANG_S = 3 * NVML_BOUND_S


def test_nvml_init_fails_at_start_exits_1_then_recovers(tmp_path: pathlib.Path, apiserver):
    """Documented behaviour (docs/health.md §6): exit non-zero naming the NVML error; the DaemonSet restarts it."""
    nvml = fakenvml.FakeNvml.create(tmp_path / "nvml", [fakenvml.device(0)])
    nvml.inject_error("nvmlInit", NVML_ERROR_DRIVER_NOT_LOADED)
    sock = tempfile.mkdtemp(prefix="vgpu-rel-", dir="/tmp")
    kubelet = FakeKubelet(sock).start()
    env = {"KUBECONFIG": str(apiserver.kubeconfig(tmp_path / "kubeconfig")), "HOOK_PATH": str(tmp_path)}
    procs: list[PluginProcess] = []
    try:
        (tmp_path / "a").mkdir()
        p = PluginProcess(tmp_path / "a", sock, nvml, env=env).start()
        procs.append(p)
        sw = Stopwatch()
        assert p.wait_exit(30) == 1
        exit_s = sw.elapsed
        log = p.log()
        assert "NVML cannot start" in log and "Driver Not Loaded" in log or "driver" in log.lower(), log[-2000:]
        assert kubelet.registrations == []  # nothing was advertised from a node without NVML
        nvml.clear_error("nvmlInit")  # the driver is back: the next (DaemonSet) start works
        (tmp_path / "b").mkdir()
        sw.restart()
        q = PluginProcess(tmp_path / "b", sock, nvml, env=env).start()
        procs.append(q)
        kubelet.wait_for_plugins(NAMES, timeout=30)
        recovery = sw.elapsed
    finally:
        for proc in procs:
            proc.terminate()
        kubelet.stop()
        shutil.rmtree(sock, ignore_errors=True)
    record(
        "nvml-init",
        "nvmlInit fails at start (DRIVER_NOT_LOADED)",
        f"clean exit 1 after {exit_s:.2f} s naming the NVML error and the driver hint (documented; "
        "the default fail-on-init-error=true; false waits and retries instead); a restart after the driver "
        "returns registers "
        "(recovery = restart → three resources listed)",
        recovery,
        30,
        30,
    )
    assert recovery <= 30


def test_gpu_lost_xid79(fresh_cluster):
    cluster = fresh_cluster  # GPU 0 stays lost: not the shared cluster
    before = len(cluster.kubelet.plugin(NUMBER).healthy_ids())
    create_and_schedule(cluster, "on-lost", gpus=2)  # needs both GPUs: scheduled before the loss
    sw = Stopwatch()
    cluster.nvml.add_xid(0, 79)
    poll(
        lambda: len(cluster.kubelet.plugin(NUMBER).healthy_ids()) == before - 10,
        10,
        "GPU 0's IDs unhealthy at the kubelet",
    )
    detect = sw.elapsed
    lost = cluster.nvml.config["devices"][0]["uuid"]
    poll(  # --unhealthy-gpu-policy withdraw (the default): the GPU leaves the register annotation
        lambda: lost not in (cluster.node()["metadata"].get("annotations") or {}).get(keys.REGISTER, lost),
        10,
        "GPU 0 withdrawn from the register annotation",
    )
    # The pod holding the lost GPU fails with an Event; a pod on the surviving GPU is served.
    res = cluster.admit("on-lost")
    assert not res.admitted
    if res.error and "Requested" not in res.error:  # the plugin saw it (not the kubelet's own ID check)
        assert_failed_with_event(cluster, "on-lost")
    cluster.admitter.release("default/on-lost")
    cluster.store.delete("pods", "default", "on-lost")
    res = schedule_and_admit(cluster, "survivor")
    assert_own_allocation(cluster, "survivor", res)
    assert cluster.annotations("survivor")[keys.VGPU_IDS_NEW].startswith("GPU-809c7a2e")
    assert cluster.plugin.proc.poll() is None
    record(
        "nvml-xid79",
        "GPU lost (XID 79 on GPU 0)",
        "GPU 0's IDs turn unhealthy on all resources together, GPU 0 leaves the register annotation; its pod is "
        "refused; "
        "a pod on GPU 1 is served (measured: XID → kubelet sees unhealthy)",
        detect,
        10,
        31,
    )
    assert detect <= 10


def test_nvml_hang_plugin_keeps_serving_and_stops(fresh_cluster):
    cluster = fresh_cluster  # ends with GPU 1 lost and the plugin stopped: not the shared cluster
    hang = NvmlHang(cluster.nvml).start()
    try:
        # The health loop's next NVML call blocks (its periodic wait returns within ~5 s); the
        # assertions below need no NVML and poll.
        res = schedule_and_admit(cluster, "during-hang")
        assert_own_allocation(cluster, "during-hang", res)
        assert len(cluster.kubelet.plugin(NUMBER).healthy_ids()) == 20
        released = hang.release()
        rel = Stopwatch()
        # Health events work again after the hang: an XID is seen.
        cluster.nvml.add_xid(1, 79)
        poll(lambda: len(cluster.kubelet.plugin(NUMBER).healthy_ids()) == 10, 15, "XID seen after the hang")
        recovery = rel.elapsed
    finally:
        hang.close()
    sw = Stopwatch()
    cluster.plugin.proc.send_signal(15)
    assert cluster.plugin.wait_exit(15) == 0
    record(
        "nvml-hang-plugin",
        "NVML calls hang (plugin; every call blocks in the library)",
        f"Allocate and ListAndWatch keep working (no NVML on that path); a hung call was "
        f"{'released' if released else 'not reached'}; health events resume (recovery = release → XID "
        f"seen); SIGTERM exit 0 in {sw.elapsed:.2f} s",
        recovery,
        15,
        32,
    )


def _metric(body: bytes, name: str) -> float:
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in the scrape")


def test_nvml_hang_monitor_stays_responsive(tmp_path: pathlib.Path, apiserver):
    nvml = fakenvml.FakeNvml.create(tmp_path / "mnvml", [fakenvml.device(0, memory_used_mib=1000)])
    hook = tmp_path / "mhook"
    hook.mkdir()
    t_start = Stopwatch()
    mon = MonitorProcess(tmp_path, hook, apiserver.kubeconfig(tmp_path / "kc"), nvml_env=nvml.env).start()
    print(f"monitor started in {t_start.elapsed:.2f} s")
    hang = NvmlHang(nvml)
    try:
        assert b"GPU-" in mon.scrape() or mon.scrape()
        hang.start()
        # The first scrape's NVML refresh blocks: it waits one bound and serves the last good
        # sample; while the call stays stuck, later scrapes do not wait at all.  Observe a few
        # bounds' worth of scrapes (the monitor's only periodic work, the 5 s tick, makes no NVML call).
        worst, scrapes, window = 0.0, 0, Stopwatch()
        while window.elapsed < OBSERVE_HANG_S or scrapes < 5:
            sw = Stopwatch()
            status, body, _ = mon.get("/metrics")
            worst = max(worst, sw.elapsed)
            scrapes += 1
            assert status == 200
            time.sleep(0.02)  # the scrape cadence (not synchronisation): leave the CPU to the monitor
        observed_s = window.elapsed
        stale = _metric(body, "vgpu_monitor_nvml_stale_serves_total")
        age = _metric(body, "vgpu_monitor_nvml_sample_age_seconds")
        assert stale >= 1, "no scrape was served from the last good sample: NVML never hung"
        assert age >= NVML_BOUND_S, f"the values served are {age:.2f} s old: not the last good sample"
        assert mon.proc.poll() is None
        assert hang.release(), "no NVML call was blocked on the FIFO"
        rel = Stopwatch()
        nvml.update_device(0, memory_used_mib=4321)
        poll(lambda: b" 4530896896" in mon.scrape(), 20, "fresh NVML values after the hang")
        recovery = rel.elapsed
    finally:
        hang.close()
        t_term = Stopwatch()
        rc = mon.terminate()
        print(f"monitor stopped in {t_term.elapsed:.2f} s\n" + mon.log()[-3000:])
    assert rc == 0
    record(
        "nvml-hang-monitor",
        "NVML calls hang (monitor)",
        f"/metrics keeps answering ({scrapes} scrapes over {observed_s:.1f} s, slowest {worst:.2f} s; "
        f"the monitor's NVML bound is {NVML_BOUND_S:g} s) from the last good sample ({stale:.0f} stale "
        "serves counted); fresh values after release (recovery = release → new value scraped)",
        recovery,
        20,
        33,
    )
    assert worst <= 3.0
