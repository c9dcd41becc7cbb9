"""PodDevices (vgpu-ids-new / devices-to-allocate): golden strings, MIG ids, consumption, errors."""

from __future__ import annotations

import pytest

from vgpu.protocol import (
    ContainerDevice,
    MigSlot,
    ProtocolError,
    all_consumed,
    consume_segment,
    decode_container_devices,
    decode_pod_devices,
    decode_pod_devices_as_volcano,
    encode_pod_devices,
    keys,
    parse_mig_id_as_volcano,
    segment_gpu_uuids,
)

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
MIGU = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
# docs/protocol.md §6 step 3
WORKED = f"{U1},NVIDIA,3000,30:{U0},NVIDIA,3000,30:;{U1},NVIDIA,2000,0:"


def test_worked_example_golden():
    pod = ((ContainerDevice(U1, 3000, 30), ContainerDevice(U0, 3000, 30)), (ContainerDevice(U1, 2000, 0),))
    assert encode_pod_devices(pod) == WORKED
    assert decode_pod_devices(WORKED) == pod


def test_spec_examples():
    real = "GPU-68e53c11-902e-fb97-ea05-c0d62322efe2,NVIDIA,2875,100:"  # plugin#142
    assert decode_pod_devices(real) == ((ContainerDevice("GPU-68e53c11-902e-fb97-ea05-c0d62322efe2", 2875, 100),),)
    mig = f"{MIGU}[group2-3],NVIDIA,8000,0:"
    ((dev,),) = decode_pod_devices(mig)
    assert dev == ContainerDevice(MIGU, 8000, 0, MigSlot("group2", 3))
    assert dev.device_id == f"{MIGU}[group2-3]"
    assert encode_pod_devices([[dev]]) == mig


def test_consumption_keeps_separators():
    v = f"{U0},NVIDIA,3000,50:;{U1},NVIDIA,2000,0:"
    v1 = consume_segment(v, 0)
    assert v1 == f";{U1},NVIDIA,2000,0:"
    assert not all_consumed(v1)
    v2 = consume_segment(v1, 1)
    assert v2 == ";"
    assert all_consumed(v2)
    assert decode_pod_devices(v2) == ((), ())
    # worked example: after c1
    assert consume_segment(WORKED, 0) == f";{U1},NVIDIA,2000,0:"
    with pytest.raises(ProtocolError, match="no such segment"):
        consume_segment(v, 2)


def test_consumption_a6_three_containers():
    v = encode_pod_devices(
        [
            [ContainerDevice(U0, 1, 0)],
            [ContainerDevice(U0, 1, 0), ContainerDevice(U1, 1, 0)],
            [ContainerDevice(U1, 1, 0)],
        ]
    )
    steps = [v]
    for i in range(3):
        steps.append(consume_segment(steps[-1], i))
    assert [s.count(";") for s in steps] == [2, 2, 2, 2]
    assert steps[-1] == ";;"
    assert [all_consumed(s) for s in steps] == [False, False, False, True]


def test_empty_string_is_one_empty_segment():
    assert decode_pod_devices("") == ((),)
    assert encode_pod_devices([[]]) == ""
    with pytest.raises(ValueError):
        encode_pod_devices([])


def test_segment_uuids():
    (seg, _) = decode_pod_devices(WORKED)
    assert segment_gpu_uuids(seg) == {U0, U1}
    (mig,) = decode_pod_devices(f"{MIGU}[group1-0],NVIDIA,1,0:")
    assert segment_gpu_uuids(mig) == {MIGU}


@pytest.mark.parametrize(
    "value, where, fragment",
    [
        (f"{U0},NVIDIA,3000,30", "segment 0, device 0", 'not terminated by ":"'),
        (f"{U0},NVIDIA,3000,30:{U1},NVIDIA,1,1", "segment 0, device 1", 'not terminated by ":"'),
        (f"{U0},NVIDIA,3000:", "segment 0, device 0", "has 3 fields"),
        (f"{U0},NVIDIA,3000,30,1:", "segment 0, device 0", "has 5 fields"),
        (f";{U0},NVIDIA,3000,30::", "segment 1, device 1", "has 1 fields"),
        ("GPU-abc,NVIDIA,3000,30:", "segment 0, device 0, field id", "GPU-"),
        (f"{U0}[group2,3],NVIDIA,1,1:", "segment 0, device 0", "has 5 fields"),
        (f"{U0}[group2-x],NVIDIA,1,1:", "segment 0, device 0, field id", "[group-position]"),
        (f"{U0}[group-2-3],NVIDIA,1,1:", "segment 0, device 0, field id", "[group-position]"),
        (f"{U0}[-3],NVIDIA,1,1:", "segment 0, device 0, field id", "[group-position]"),
        (f"{U0}[group2-3]x,NVIDIA,1,1:", "segment 0, device 0, field id", "[group-position]"),
        (f"{U0},nvidia,3000,30:", "segment 0, device 0, field type", '"NVIDIA"'),
        (f"{U0},NVIDIA,-1,30:", "segment 0, device 0, field usedmem", "uint32"),
        (f"{U0},NVIDIA,4294967296,30:", "segment 0, device 0, field usedmem", "uint32"),
        (f"{U0},NVIDIA,,30:", "segment 0, device 0, field usedmem", "uint32"),
        (f"{U0},NVIDIA,1,101:", "segment 0, device 0, field usedcores", "0..100"),
        (f"{U0},NVIDIA,1,5%:", "segment 0, device 0, field usedcores", "0..100"),
        (f"{U0},NVIDIA,1,1:;{U1},NVIDIA,1,1:;x", "segment 2, device 0", 'not terminated by ":"'),
    ],
)
def test_strict_decoder_errors_say_where(value, where, fragment):
    with pytest.raises(ProtocolError) as exc:
        decode_pod_devices(value, annotation=keys.DEVICES_TO_ALLOCATE)
    assert exc.value.where == where
    assert fragment in str(exc.value)
    assert str(exc.value).startswith("volcano.sh/devices-to-allocate: " + where)


def test_error_names_the_annotation_given():
    with pytest.raises(ProtocolError, match=r"^volcano.sh/vgpu-ids-new: segment 0"):
        decode_pod_devices("x", annotation=keys.VGPU_IDS_NEW)
    with pytest.raises(ProtocolError, match=r"segment 4, device 0"):
        decode_container_devices("x:", index=4)


def test_long_offending_text_is_shortened():
    with pytest.raises(ProtocolError) as exc:
        decode_pod_devices("x" * 10000 + ":")
    assert len(str(exc.value)) < 300


@pytest.mark.parametrize(
    "dev, field",
    [
        (ContainerDevice("GPU-1", 1, 1), "id"),
        (ContainerDevice(U0, -1, 1), "usedmem"),
        (ContainerDevice(U0, 2**32, 1), "usedmem"),
        (ContainerDevice(U0, 1, 101), "usedcores"),
        (ContainerDevice(U0, 1, 1, MigSlot("g-1", 0)), "id"),
        (ContainerDevice(U0, 1, 1, MigSlot("", 0)), "id"),
        (ContainerDevice(U0, 1, 1, MigSlot("g", -1)), "id"),
    ],
)
def test_encoder_refuses_invalid_devices(dev, field):
    with pytest.raises(ProtocolError) as exc:
        encode_pod_devices([[ContainerDevice(U0, 1, 1)], [dev]])
    assert exc.value.where == f"segment 1, device 0, field {field}"


def test_volcano_decoder_versions():
    v = f"{U0},NVIDIA,12x,30:{U1},NVIDIA:;{U1},NVIDIA,5,7:junk"
    old, old_problems = decode_pod_devices_as_volcano(v, strict_devices=False)
    assert [[(d.id, d.usedmem, d.usedcores) for d in seg] for seg in old] == [[(U0, 0, 30)], [(U1, 5, 7)]]
    assert len(old_problems) == 1
    new, new_problems = decode_pod_devices_as_volcano(v, strict_devices=True)
    assert [[(d.id, d.usedmem) for d in seg] for seg in new] == [[], [(U1, 5)]]
    assert len(new_problems) == 2
    assert decode_pod_devices_as_volcano("", strict_devices=True) == ((), ())
    assert decode_pod_devices_as_volcano(";", strict_devices=True)[0] == ((), ())


def test_volcano_mig_id_parser():
    assert parse_mig_id_as_volcano(f"{MIGU}[group2-3]") == MigSlot("group2", 3)
    assert parse_mig_id_as_volcano(f"{MIGU}[group2,3]") is None
    assert parse_mig_id_as_volcano(MIGU) is None
    assert parse_mig_id_as_volcano(f"{MIGU}[a-b-1]") is None
