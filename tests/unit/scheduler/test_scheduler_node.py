"""Node decode, the handshake state machine, the allocatable rule, R-1 and R-6.

docs/scheduler-emulator.md §9.1; docs/protocol.md §2.2 and §2.3 (handshake, allocatable rule).
"""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest

from vgpu.protocol import RegisterRecord, encode_register, encode_reported, keys
from vgpu.sim.scheduler.core import SchedulerCore
from vgpu.sim.scheduler.model import SchedulerConfig
from vgpu.sim.scheduler.versions import VERSIONS, normalize_version, switches_for

from .helpers import A100, ALLOC, T0, UUIDS, node_annotations, register

HANDSHAKE_VERSIONS = [v for v in VERSIONS if v != "master"]


def core(version="master", **kw):
    return SchedulerCore(SchedulerConfig(version=version, **kw))


@pytest.mark.parametrize("version", VERSIONS)
def test_r1_our_register_is_accepted_by_every_version(version):
    c = core(version)
    d = c.node_event("n1", node_annotations(4), ALLOC, T0)
    assert d.usable, d.reason
    assert [(g.id, g.uuid, g.number, g.memory) for g in c.nodes["n1"].gpus] == [
        (i, UUIDS[i], 10, 81920) for i in range(4)
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_r1_five_field_records(version):
    legacy = "".join(f"{UUIDS[i]},10,81920,{A100},true:" for i in range(2))
    c = core(version)
    d = c.node_event("n1", {keys.REGISTER: legacy, keys.HANDSHAKE: encode_reported(T0)}, ALLOC, T0)
    assert d.usable == (switches_for(version).min_register_fields == 5)
    if not d.usable:
        assert "wrong Node GPU info" in d.reason and "node not initialized with devicehamivgpu" in d.reason


def test_non_dense_ids_are_refused():
    ann = node_annotations(2)
    ann[keys.REGISTER] = "junk:" + ann[keys.REGISTER]
    d = core().node_event("n1", ann, ALLOC, T0)
    assert not d.usable and "not dense" in d.reason


def test_register_missing_or_empty():
    c = core()
    assert "no volcano.sh/node-vgpu-register" in c.node_event("n1", {}, ALLOC, T0).reason
    assert "no devices" in c.node_event("n1", {keys.REGISTER: "nothing"}, ALLOC, T0).reason


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
def test_handshake_state_machine(version):
    c = core(version)
    ann = node_annotations()
    # Reported → Requesting_<now> and the node is used
    d = c.node_event("n1", ann, {}, T0)
    assert d.usable and d.handshake_write == "Requesting_2026.08.20 02:00:00"
    # own stamp seen within 60 s → used, no write
    ann[keys.HANDSHAKE] = d.handshake_write
    d = c.node_event("n1", ann, {}, T0 + timedelta(seconds=60))
    assert d.usable and d.handshake_write is None
    # more than 60 s later → Deleted_<now>, node ignored
    d = c.node_event("n1", ann, {}, T0 + timedelta(seconds=61))
    assert not d.usable and d.handshake_write == "Deleted_2026.08.20 02:01:01"
    assert "n1" not in c.nodes
    ann[keys.HANDSHAKE] = d.handshake_write
    d = c.node_event("n1", ann, {}, T0 + timedelta(seconds=90))
    assert not d.usable and d.handshake_write is None
    # the plugin answers → Requesting again
    ann[keys.HANDSHAKE] = encode_reported(T0 + timedelta(seconds=91))
    d = c.node_event("n1", ann, {}, T0 + timedelta(seconds=92))
    assert d.usable and d.handshake_write.startswith("Requesting_")
    # handshake key missing → no devices
    del ann[keys.HANDSHAKE]
    assert not c.node_event("n1", ann, ALLOC, T0).usable


def test_handshake_parse_error_drops_node():
    c = core("v1.15")
    ann = node_annotations()
    ann[keys.HANDSHAKE] = "Requesting_garbage"
    d = c.node_event("n1", ann, {}, T0)
    assert not d.usable and d.handshake_write.startswith("Deleted_")


@pytest.mark.parametrize("hours, expires", [(8, False), (-8, True), (0, False)])
def test_r6_stamp_in_local_time_read_as_utc(hours, expires):
    """East of UTC the node never expires; west of UTC it is dropped at the next event."""
    c = core("v1.15", tz=timezone(timedelta(hours=hours)))
    ann = node_annotations()
    d = c.node_event("n1", ann, {}, T0)
    ann[keys.HANDSHAKE] = d.handshake_write
    d = c.node_event("n1", ann, {}, T0 + timedelta(seconds=30))
    assert d.usable is not expires


def test_master_ignores_handshake_and_needs_allocatable():
    c = core("master")
    ann = {keys.REGISTER: register()}
    d = c.node_event("n1", ann, ALLOC, T0)
    assert d.usable and d.handshake_write is None
    ann[keys.HANDSHAKE] = "Deleted_2020.01.01 00:00:00"
    assert c.node_event("n1", ann, ALLOC, T0).usable
    for res in ALLOC:
        for bad in ({k: v for k, v in ALLOC.items() if k != res}, {**ALLOC, res: "0"}):
            d = c.node_event("n1", ann, bad, T0)
            assert not d.usable and res in d.reason


def test_master_allocatable_names_are_hard_coded():
    c = core("master", count_name="example.com/gpu")
    renamed = {"example.com/gpu": "20", "volcano.sh/vgpu-memory": "1", "volcano.sh/vgpu-cores": "1"}
    assert not c.node_event("n1", {keys.REGISTER: register()}, renamed, T0).usable


def test_mig_mode_and_fallback():
    c = core("master")
    recs = [
        RegisterRecord(UUIDS[0], 7, 81920, A100, True, "mig"),
        RegisterRecord(UUIDS[1], 7, 16384, "NVIDIA-Tesla T4", True, "mig"),
    ]
    d = c.node_event("n1", {keys.REGISTER: encode_register(recs)}, ALLOC, T0)
    assert d.usable
    g0, g1 = c.nodes["n1"].gpus
    assert [g.group for g in g0.mig_template] == ["group1", "group2", "group3", "group4"]
    assert g1.mig_template == ()  # no geometry for T4: "fall back to hamicore mode"
    # one handler per node: the last record's effective mode applies to every GPU (case 9)
    assert c.nodes["n1"].mode == g0.mode == g1.mode == "hami-core"
    assert any("fall back to hamicore mode" in p for p in c.problems)
    # before v1.12 there is no MIG at all
    old = core("v1.11")
    old.node_event("n1", {keys.REGISTER: encode_register(recs), keys.HANDSHAKE: "x"}, {}, T0)
    assert [g.mode for g in old.nodes["n1"].gpus] == ["hami-core", "hami-core"]


@pytest.mark.parametrize(
    "text, expected",
    [("1.15", "v1.15"), ("v1.15.2", "v1.15"), ("v1.16.0-alpha", "master"), ("master", "master"), ("v1.9", "v1.9")],
)
def test_version_names(text, expected):
    assert normalize_version(text) == expected


@pytest.mark.parametrize("bad", ["v1.8", "2.0", "next"])
def test_unknown_versions_rejected(bad):
    with pytest.raises(ValueError):
        normalize_version(bad)
    with pytest.raises(ValueError):
        SchedulerConfig(version=bad)


def test_config_validation():
    with pytest.raises(ValueError):
        SchedulerConfig(policy="random")
    with pytest.raises(ValueError):
        SchedulerConfig(gpu_memory_factor=0)
