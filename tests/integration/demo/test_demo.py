"""`vgpu demo` end to end, as a user runs it: a real subprocess that starts real plugin and monitor
processes.  Done-when of the demo issue: every sample pod reaches bind-phase=success (the oversized
one stays Unschedulable, as documented), /metrics served per-pod values, an XID made a GPU
unhealthy, a MIG allocation happened, and nothing is left behind — no process, no socket, no
temp dir — after a scripted run, after Ctrl-C, and after a component died."""

from __future__ import annotations

import os
import re
import signal

import psutil

from .conftest import child_names, find_child

NUMBER = "volcano.sh/vgpu-number"


def _workdir_of(run) -> str:
    line = run.wait_line("simulated API server at", 60)
    m = re.search(r"kubeconfig (/\S+)/kubeconfig", line)
    assert m, line
    return m.group(1)


def test_scripted_run_reaches_every_milestone_and_leaves_nothing(demo):
    run = demo(["--duration", "20", "--json"])
    code = run.wait(300)
    rep = run.report()
    assert code == 0, run.output()[-8000:]
    assert rep["exit_code"] == 0 and rep["elapsed_s"] >= 20 and not rep["interrupted"]
    assert all(c["ok"] for c in rep["checks"]), rep["checks"]
    assert {c["name"] for c in rep["checks"]} >= {
        "registration",
        "pods",
        "multi-container",
        "metrics",
        "feedback",
        "mig",
        "xid",
        "components",
    }

    pods = {p["pod"].split("/")[1]: p for p in rep["pods"]}
    assert set(pods) == {"fractional-gpu", "multi-container", "two-gpus", "mig-slice", "oversized"}
    for p in pods.values():
        if p["expect"] == "success":
            assert (p["state"], p["bind_phase"]) == ("Running", "success"), p
            assert p["final_annotations"]["volcano.sh/devices-to-allocate"].strip(";") == ""
            assert p["final_annotations"]["volcano.sh/vgpu-time"] == "18446744073709551615"
    over = pods["oversized"]
    assert over["expect"] == "unschedulable" and over["state"] == "Unschedulable" and over["node"] == ""
    assert over["bind_phase"] == "" and "allocate" not in over
    assert over["reason"].startswith("0/2 nodes are unavailable")

    # A multi-container pod: only the vGPU container got devices, env and mounts.
    inference, shipper = pods["multi-container"]["allocate"]
    assert inference["container"] == "inference" and shipper["container"] == "log-shipper"
    assert shipper["devices"] == {} and shipper["envs"] == {} and shipper["mounts"] == []
    assert (
        inference["envs"]["CUDA_DEVICE_MEMORY_LIMIT_0"] == "16384m"
        and inference["envs"]["CUDA_DEVICE_SM_LIMIT"] == "40"
    )
    assert {m["container_path"] for m in inference["mounts"]} == {
        "/usr/local/vgpu/libvgpu.so",
        "/etc/ld.so.preload",
        "/tmp/vgpu",
        "/tmp/vgpulock",
    }
    (trainer,) = pods["two-gpus"]["allocate"]
    assert len(trainer["envs"]["NVIDIA_VISIBLE_DEVICES"].split(",")) == 2

    # /metrics of gpu-node-1's monitor carried each HAMi-core pod's own usage and its limit.
    samples = rep["metrics"]["gpu-node-1"]["samples"]
    for name, limit_mib in (("fractional-gpu", 8192), ("multi-container", 16384), ("two-gpus", 20480)):
        used = [
            s for s in samples if s["name"] == "vGPU_device_memory_usage_in_bytes" and s["labels"]["podname"] == name
        ]
        limits = [
            s["value"] for s in samples if s["name"] == "hami_vgpu_memory_limit_bytes" and s["labels"]["pod"] == name
        ]
        assert used and all(s["value"] > 0 for s in used), name
        assert limits and all(v == limit_mib << 20 for v in limits), (name, limits)
        assert f"default/{name}" in rep["metrics_seen"]

    # The monitor's feedback loop wrote into the regions.
    fb = [c["feedback"] for p in rep["pods"] for c in p["containers"] if c["kind"] == "hami-core"]
    assert any(f["decrements_seen"] or f["times_blocked"] or f["switch_changes"] for f in fb), fb

    # MIG: the A30 node created the instance; the container got only its MIG UUID.
    mig = rep["mig"]
    assert mig["pod"] == "default/mig-slice" and mig["node"] == "gpu-node-2"
    assert re.fullmatch(r"GPU-[0-9a-f-]+\[group2-0\],NVIDIA,10240,0:", mig["vgpu_ids_new"])
    (ctr,) = pods["mig-slice"]["allocate"]
    assert list(ctr["envs"]) == ["NVIDIA_VISIBLE_DEVICES"] and ctr["envs"]["NVIDIA_VISIBLE_DEVICES"].startswith("MIG-")
    assert ctr["mounts"] == []
    (a30,) = mig["nvml_state"]["devices"]
    assert a30["mig_mode"] is True and len(a30["gpu_instances"]) == 2  # group2 = 2 x 2g.12gb

    # XID: that GPU's devices are unhealthy for the kubelet, and health=false in the register annotation.
    x = rep["xid"]
    assert x["unhealthy_at"] is not None and x["register_health"] is False
    assert x["kubelet_healthy"][NUMBER] == "10/20"
    node1 = next(n for n in rep["nodes"] if n["name"] == "gpu-node-1")
    assert (
        f"{x['uuid']},10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,false,hami-core:"
        in node1["annotations"]["volcano.sh/node-vgpu-register"]
    )
    assert node1["allocatable"][NUMBER] == "10"

    # Nothing left: processes, sockets, temp dir.
    assert child_names(run) == {"plugin", "monitor"} and len(run.seen) >= 4
    assert run.descendants_alive() == []
    socks = [s for n in rep["nodes"] for s in n["sockets"]]
    assert any(s.endswith("/kubelet.sock") for s in socks) and any(s.endswith("nvidia-vgpu-memory.sock") for s in socks)
    assert not any(os.path.exists(s) for s in socks)
    assert not os.path.exists(rep["workdir"])


def test_ctrl_c_mid_flow_stops_everything_cleanly(demo):
    run = demo([])
    workdir = _workdir_of(run)
    run.wait_line("started (libvgpu's part)", 180)
    assert os.path.isdir(workdir) and child_names(run) == {"plugin", "monitor"}
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(60) == 0, run.output()[-6000:]
    out = run.output()
    assert "interrupted: stopping every component" in out and "FAIL  components" not in out
    assert run.descendants_alive() == []
    assert not os.path.exists(workdir)


def test_ctrl_c_during_startup(demo):
    run = demo(["--duration", "30"])
    workdir = _workdir_of(run)
    run.proc.send_signal(signal.SIGINT)
    assert run.wait(60) == 130, run.output()[-6000:]
    assert run.descendants_alive() == []
    assert not os.path.exists(workdir)


def test_a_dying_component_fails_the_run(demo):
    run = demo(["--duration", "60"])
    workdir = _workdir_of(run)
    run.wait_line("3. Scheduling", 180)
    monitor = find_child(run, "monitor", "gpu-node-1")
    monitor.send_signal(signal.SIGKILL)
    assert run.wait(60) == 1, run.output()[-6000:]
    out = run.output()
    assert "vgpu monitor (gpu-node-1) exited unexpectedly with status -9" in out
    assert "FAIL  components" in out
    assert run.descendants_alive() == []
    assert not psutil.pid_exists(monitor.pid) or monitor.status() == psutil.STATUS_ZOMBIE
    assert not os.path.exists(workdir)


def test_a_plugin_that_cannot_start_fails_the_run(demo):
    run = demo(
        ["--gpus", "A100-80GB:1", "--duration", "5"], env={"VGPU_FAKE_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"}
    )
    assert run.wait(120) == 1, run.output()[-6000:]
    out = run.output()
    assert "vgpu plugin (gpu-node-1) exited" in out and "NVML cannot start" in out
    assert run.descendants_alive() == []


def test_older_volcano_uses_the_handshake_and_leaves_mig_out(demo):
    run = demo(["--volcano-version", "v1.11", "--policy", "spread", "--duration", "1", "--json"])
    assert run.wait(300) == 0, run.output()[-8000:]
    rep = run.report()
    assert "needs >= v1.12" in rep["notes"][0] and [n["name"] for n in rep["nodes"]] == ["gpu-node-1"]
    pods = {p["pod"].split("/")[1]: p for p in rep["pods"]}
    assert pods["mig-slice"]["state"] == "Skipped"
    assert all(pods[n]["bind_phase"] == "success" for n in ("fractional-gpu", "multi-container", "two-gpus"))
    hs = rep["nodes"][0]["annotations"]["volcano.sh/node-vgpu-handshake"]
    assert hs.startswith(("Requesting_", "Reported ")), hs
    assert "annotations PATCHed before the Binding" in "".join(run.stderr)
    assert run.descendants_alive() == [] and not os.path.exists(rep["workdir"])


def test_cdi_mode_hands_out_cdi_names_that_the_runtime_resolves(demo):
    run = demo(["--device-list-strategy", "cdi-cri", "--duration", "1", "--json"])
    code = run.wait(300)
    rep = run.report()
    assert code == 0, run.output()[-8000:]
    assert all(c["ok"] for c in rep["checks"]), rep["checks"]
    pods = {p["pod"].split("/")[1]: p for p in rep["pods"]}
    (frac,) = pods["fractional-gpu"]["allocate"]
    assert "NVIDIA_VISIBLE_DEVICES" not in frac["envs"] and "CUDA_DEVICE_MEMORY_LIMIT_0" in frac["envs"]
    assert [m["container_path"] for m in frac["mounts"]][:2] == ["/usr/local/vgpu/libvgpu.so", "/etc/ld.so.preload"]
    (uuid,) = frac["device_ids"][NUMBER]
    assert frac["cdi_devices"] == [f"nvidia.com/gpu={uuid.rsplit('-', 1)[0]}"]
    (mig,) = pods["mig-slice"]["allocate"]
    (name,) = mig["cdi_devices"]
    assert name.startswith("nvidia.com/gpu=MIG-")
    out = run.output()
    assert "runtime: CDI resolved 1 device(s)" in out
    assert f"runtime: unresolvable CDI devices {name}" in out and "spec regenerated after the MIG layout change" in out
