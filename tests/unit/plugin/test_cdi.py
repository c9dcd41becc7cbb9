"""CDI names, the device-list strategies and the spec check (docs/cdi.md §2–§6), without processes."""

from __future__ import annotations

import json
import os

import pytest
import yaml

from vgpu.plugin.api import pb
from vgpu.plugin.cdi import CdiNameError, CdiNamer, DeviceListPolicy, response_cdi_names
from vgpu.plugin.cdi_specs import MAX_SPEC_BYTES, CdiSpecCheck, scan_spec_dirs
from vgpu.protocol import cdi
from vgpu.sim.cdi import CdiResolver, UnresolvableCdiDevices
from vgpu.sim.cdi.resolver import names_of
from vgpu.sim.nvml.cdi_spec import build_spec

G0 = "GPU-00000000-6888-5063-1e4d-f2a09cfbf000"
G1 = "GPU-00000001-6888-5063-1e4d-f2a09cfbf001"
M0 = "MIG-1a2b3c4d-0001-5002-0003-000000000004"


def policy(strategy: str = "envvar", name: str = "uuid", **kw: str) -> DeviceListPolicy:
    s = {"prefix": "cdi.k8s.io/", "kind": "nvidia.com/gpu", "dirs": "/etc/cdi,/var/run/cdi"} | kw
    return DeviceListPolicy.from_settings(strategy, s["prefix"], name, s["kind"], s["dirs"])


HAMI_ENVS = {
    "NVIDIA_VISIBLE_DEVICES": f"{G0},{G1}",
    "CUDA_DEVICE_MEMORY_LIMIT_0": "1000m",
    "CUDA_DEVICE_SM_LIMIT": "30",
}
HAMI_MOUNTS = [
    pb.Mount(container_path="/usr/local/vgpu/libvgpu.so", host_path="/usr/local/vgpu/libvgpu.so", read_only=True),
    pb.Mount(container_path="/etc/ld.so.preload", host_path="/usr/local/vgpu/ld.so.preload", read_only=True),
]


def hami_response() -> pb.ContainerAllocateResponse:
    return pb.ContainerAllocateResponse(envs=HAMI_ENVS, mounts=HAMI_MOUNTS)


# -- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nvidia.com/gpu=0", "nvidia.com/gpu=0:1", f"nvidia.com/gpu={G0}", "a/b=all"])
def test_qualified_names_parse(name):
    assert str(cdi.parse_qualified_name(name)) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("0", "not fully qualified"),
        ("nvidia.com/gpu", "not fully qualified"),
        ("nvidia.com/gpu=", "not fully qualified"),
        ("nvidia.com=0", "expected vendor/class"),
        ("1nvidia.com/gpu=0", "vendor"),
        ("nvidia.com/g.pu=0", "class"),
        ("nvidia.com/gpu=0:", "device name"),
        ("nvidia.com/gpu=a b", "device name"),
    ],
)
def test_bad_qualified_names_say_which_part(name, why):
    with pytest.raises(cdi.CdiError, match=why):
        cdi.parse_qualified_name(name)


def test_toolkit_names_for_gpus_and_mig_devices():
    assert cdi.gpu_device_name("index", 3, G0) == "3"
    assert cdi.gpu_device_name("uuid", 3, G0) == G0
    assert cdi.mig_device_name("index", 0, 1, M0) == "0:1"
    assert cdi.mig_device_name("uuid", 0, 1, M0) == M0


def test_annotation_key_rules():
    key = cdi.annotation_key("cdi.k8s.io/", "0b1c")
    assert key == "cdi.k8s.io/vgpu-device-plugin_0b1c"
    assert len(cdi.annotation_key("cdi.k8s.io/", "8e3c" * 9)) == len("cdi.k8s.io/") + 18 + 1 + 36
    with pytest.raises(cdi.CdiError, match="longer than 63"):
        cdi.annotation_key("cdi.k8s.io/", "x" * 50)
    with pytest.raises(cdi.CdiError, match="DNS subdomain"):
        cdi.annotation_key("cdi.k8s.io", "x")
    assert cdi.annotation_key("example.com/", "x") == "example.com/vgpu-device-plugin_x"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("envvar", ("envvar",)),
        ("envvar,cdi-cri", ("envvar", "cdi-cri")),
        (" cdi-cri , cdi-annotations,cdi-cri", ("cdi-cri", "cdi-annotations")),
    ],
)
def test_strategy_lists(text, want):
    assert cdi.parse_strategies(text) == want


@pytest.mark.parametrize("text", ["", ",", "cdi", "envvar,nope"])
def test_bad_strategy_lists_are_refused(text):
    with pytest.raises(cdi.CdiError, match="device-list strategy"):
        cdi.parse_strategies(text)


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"strategy": "cdi-cri", "dirs": ""}, "at least one"),
        ({"strategy": "cdi-cri", "dirs": "etc/cdi"}, "absolute"),
        ({"kind": "nvidia.com"}, "vendor/class"),
        ({"name": "minor"}, "uuid, index"),
        ({"prefix": "Cdi.k8s.io/"}, "lowercase DNS"),
    ],
)
def test_bad_settings_are_refused(kw, why):
    with pytest.raises(cdi.CdiError, match=why):
        policy(kw.pop("strategy", "envvar"), kw.pop("name", "uuid"), **kw)


# -- strategies on a response ------------------------------------------------------------------


def test_envvar_keeps_the_response_as_it_is():
    p = policy("envvar")
    assert p.is_plain_envvar
    assert p.apply(hami_response(), str) == hami_response()


def test_cdi_cri_alone_drops_the_env_var_and_keeps_hami_core():
    out = policy("cdi-cri").apply(hami_response(), str)
    assert "NVIDIA_VISIBLE_DEVICES" not in out.envs
    assert {k: v for k, v in out.envs.items()} == {k: v for k, v in HAMI_ENVS.items() if k != "NVIDIA_VISIBLE_DEVICES"}
    assert list(out.mounts) == HAMI_MOUNTS
    assert [d.name for d in out.cdi_devices] == [f"nvidia.com/gpu={G0}", f"nvidia.com/gpu={G1}"]
    assert not out.annotations


def test_cdi_annotations_one_key_per_response():
    out = policy("cdi-annotations", kind="example.com/accel").apply(hami_response(), str, lambda: "r1")
    assert dict(out.annotations) == {
        "cdi.k8s.io/vgpu-device-plugin_r1": f"example.com/accel={G0},example.com/accel={G1}"
    }
    assert not out.cdi_devices and "NVIDIA_VISIBLE_DEVICES" not in out.envs
    assert response_cdi_names(out, "cdi.k8s.io/") == [f"example.com/accel={G0}", f"example.com/accel={G1}"]


def test_volume_mounts_list_the_devices_as_dev_null_mounts():
    out = policy("volume-mounts").apply(hami_response(), str)
    assert out.envs["NVIDIA_VISIBLE_DEVICES"] == "/var/run/nvidia-container-devices"
    extra = [(m.container_path, m.host_path) for m in out.mounts[len(HAMI_MOUNTS) :]]
    assert extra == [(f"/var/run/nvidia-container-devices/{u}", "/dev/null") for u in (G0, G1)]


def test_envvar_and_cdi_cri_together():
    out = policy("envvar,cdi-cri", "index").apply(hami_response(), CdiNamer("index", {G0: 0, G1: 1}))
    assert out.envs["NVIDIA_VISIBLE_DEVICES"] == f"{G0},{G1}"
    assert [d.name for d in out.cdi_devices] == ["nvidia.com/gpu=0", "nvidia.com/gpu=1"]


def test_an_empty_response_stays_empty():
    empty = pb.ContainerAllocateResponse()
    for s in ("cdi-cri", "volume-mounts", "envvar,cdi-annotations"):
        assert policy(s).apply(empty, str) == empty


def test_index_names_of_mig_devices_and_unknown_devices():
    namer = CdiNamer("index", {G0: 2}, lambda u: (2, 5) if u == M0 else None)
    assert namer(G0) == "2" and namer(M0) == "2:5"
    with pytest.raises(CdiNameError, match="not advertised"):
        namer(G1)
    with pytest.raises(CdiNameError, match="MIG device MIG-other"):
        namer("MIG-other")
    assert CdiNamer("uuid")(M0) == M0


# -- the spec check ------------------------------------------------------------------------------

GPUS = [
    {"index": 0, "uuid": G0, "minor": 0, "migs": [{"index": 1, "uuid": M0}]},
    {"index": 1, "uuid": G1, "minor": 1, "migs": []},
]


def write(path, data) -> None:
    path.write_text(json.dumps(data) if path.suffix == ".json" else yaml.safe_dump(data))


def test_scan_reads_yaml_and_json_specs_and_names_bad_files(tmp_path):
    a, b = tmp_path / "etc", tmp_path / "run"
    a.mkdir()
    b.mkdir()
    write(a / "nvidia.yaml", build_spec("550.54.15", GPUS, ["uuid"], "nvidia.com/gpu"))
    write(b / "other.json", build_spec("550.54.15", GPUS, ["index"], "nvidia.com/gpu"))
    (b / "broken.yaml").write_text("cdiVersion: [unclosed")
    write(b / "nokind.json", {"cdiVersion": "0.6.0", "devices": []})
    (b / "notes.txt").write_text("ignored")
    scan = scan_spec_dirs([str(a), str(b), str(tmp_path / "missing")])
    assert {f"nvidia.com/gpu={n}" for n in (G0, G1, M0, "0", "1", "0:1", "all")} == set(scan.names)
    assert [os.path.basename(f) for f in scan.files] == ["nvidia.yaml", "other.json"]
    problems = "\n".join(scan.problems)
    assert "broken.yaml: skipped" in problems and "nokind.json: skipped: kind" in problems
    assert "missing: no such directory" in problems


def test_oversized_and_non_regular_spec_files_are_skipped(tmp_path):
    (tmp_path / "huge.json").write_bytes(b" " * (MAX_SPEC_BYTES + 1))
    os.mkfifo(tmp_path / "fifo.yaml")
    os.symlink("/dev/zero", tmp_path / "zero.yaml")
    scan = scan_spec_dirs([str(tmp_path)])
    assert not scan.names and len(scan.problems) == 3
    assert "larger than" in "\n".join(scan.problems)


def test_check_counts_unresolved_names_and_follows_changes(tmp_path):
    check = CdiSpecCheck((str(tmp_path),))
    check.expect([f"nvidia.com/gpu={G0}", f"nvidia.com/gpu={G1}"])
    assert check.unresolved_devices() == 2
    assert "2 device name(s)" in check.describe(check.unresolved())
    write(tmp_path / "nvidia.yaml", build_spec("550.54.15", GPUS[:1], ["uuid"], "nvidia.com/gpu"))
    assert check.unresolved() == [f"nvidia.com/gpu={G1}"]
    write(tmp_path / "nvidia.yaml", build_spec("550.54.15", GPUS, ["uuid"], "nvidia.com/gpu"))
    assert check.unresolved_devices() == 0
    check.expect(["nvidia.com/gpu=MIG-new"])
    assert check.unresolved_devices() == 1


# -- the resolver stand-in ------------------------------------------------------------------------


def test_resolver_resolves_names_and_annotations_and_refuses_unknown_ones(tmp_path):
    write(tmp_path / "nvidia.yaml", build_spec("550.54.15", GPUS, ["uuid", "index"], "nvidia.com/gpu"))
    r = CdiResolver([tmp_path])
    edits = r.resolve([f"nvidia.com/gpu={G1}", "nvidia.com/gpu=0:1"])
    assert "/dev/nvidia1" in edits.device_nodes and "/dev/nvidiactl" in edits.device_nodes
    assert any("libcuda.so.550.54.15" in host for host, _ in edits.mounts)
    with pytest.raises(UnresolvableCdiDevices, match="unresolvable CDI devices nvidia.com/gpu=7"):
        r.resolve(["nvidia.com/gpu=7"])
    with pytest.raises(UnresolvableCdiDevices, match="invalid CDI device name"):
        r.resolve(["7"])
    assert names_of(["a/b=c"], {"cdi.k8s.io/p_1": "a/b=d,a/b=c", "other": "x"}) == ["a/b=c", "a/b=d"]
    with pytest.raises(UnresolvableCdiDevices, match="invalid CDI annotation key"):
        names_of([], {"cdi.k8s.io/_bad": "a/b=c"})


# -- the daemon's CDI side (what the metrics endpoint reads) ---------------------------------------


def gpu_info(index: int, uuid: str):
    from vgpu.nvml.device import GpuInfo

    return GpuInfo(
        index, uuid, "NVIDIA A100-SXM4-80GB", 81920, index, f"00000000:0{7 + index}:00.0", 0, (8, 0), True, False
    )


def test_cdi_side_reports_once_and_counts_for_the_gauge(tmp_path):
    from vgpu.plugin.cdi_setup import REASON_CDI_UNRESOLVED, CdiSide

    events: list[tuple[str, str]] = []
    side = CdiSide(
        policy("cdi-cri", "index", dirs=str(tmp_path)),
        lambda: [gpu_info(0, G0), gpu_info(1, G1)],
        node_event=lambda r, m: events.append((r, m)),
    )
    side.startup_check(mig_mode=False)
    assert side.unresolved_devices() == 2
    ((reason, message),) = events
    assert reason == REASON_CDI_UNRESOLVED and "nvidia.com/gpu=0, nvidia.com/gpu=1" in message
    side.handed_out(["nvidia.com/gpu=0"])  # already reported: no second Event
    assert len(events) == 1
    write(tmp_path / "nvidia.yaml", build_spec("550.54.15", GPUS, ["index"], "nvidia.com/gpu"))
    assert side.unresolved_devices() == 0
    assert side.name(G1) == "1"


def test_cdi_side_is_inert_with_envvar():
    from vgpu.plugin.cdi_setup import CdiSide

    side = CdiSide(policy("envvar"), lambda: [gpu_info(0, G0)], node_event=lambda r, m: pytest.fail("no Event"))
    side.startup_check(mig_mode=False)
    assert side.unresolved_devices() == 0 and side.check is None
    inner = object()
    assert side.wrap({"number": inner}) == {"number": inner}  # type: ignore[dict-item]
