"""Bind phase, vgpu-time and the annotation sets each side writes."""

from __future__ import annotations

import pytest

from vgpu.protocol import (
    VGPU_TIME_INFINITY,
    ContainerDevice,
    ProtocolError,
    allocation_failed,
    allocation_progress,
    allocation_success,
    annotations_patch,
    decode_bind_phase,
    decode_vgpu_time,
    encode_unix_seconds,
    is_vgpu_time_done,
    keys,
    scheduler_allocation,
    vgpu_time_sort_key,
)

U0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
U1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"


def test_scheduler_allocation_matches_worked_example():
    pod = [[ContainerDevice(U1, 3000, 30), ContainerDevice(U0, 3000, 30)], [ContainerDevice(U1, 2000, 0)]]
    ann = scheduler_allocation("n1", pod, 1784884863.9)
    ids = f"{U1},NVIDIA,3000,30:{U0},NVIDIA,3000,30:;{U1},NVIDIA,2000,0:"
    assert ann == {
        "volcano.sh/vgpu-node": "n1",
        "volcano.sh/vgpu-time": "1784884863",
        "volcano.sh/bind-time": "1784884863",
        "volcano.sh/bind-phase": "allocating",
        "volcano.sh/vgpu-ids-new": ids,
        "volcano.sh/devices-to-allocate": ids,
    }
    assert set(ann) == set(keys.SCHEDULER_ALLOCATION_KEYS)


def test_plugin_side_sets():
    assert allocation_success() == {"volcano.sh/bind-phase": "success", "volcano.sh/vgpu-time": "18446744073709551615"}
    assert allocation_failed() == {"volcano.sh/bind-phase": "failed", "volcano.sh/vgpu-time": "18446744073709551615"}
    assert allocation_progress(f";{U1},NVIDIA,2000,0:") == {"volcano.sh/devices-to-allocate": f";{U1},NVIDIA,2000,0:"}
    assert allocation_progress(";") == {"volcano.sh/devices-to-allocate": ";", **allocation_success()}
    assert annotations_patch({"a": "1", "b": None}) == {"metadata": {"annotations": {"a": "1", "b": None}}}


def test_vgpu_time():
    assert encode_unix_seconds(1784884863) == "1784884863"
    with pytest.raises(ValueError):
        encode_unix_seconds(-1)
    assert decode_vgpu_time("1784884863") == 1784884863
    assert decode_vgpu_time(keys.VGPU_TIME_DONE) == 2**64 - 1
    assert is_vgpu_time_done("18446744073709551615")
    for bad in ["", "-1", "1e9", " 1", "18446744073709551616", "0" * 21]:
        with pytest.raises(ProtocolError, match="volcano.sh/vgpu-time"):
            decode_vgpu_time(bad)


def test_vgpu_time_sort_key():
    assert vgpu_time_sort_key("5") < vgpu_time_sort_key("6") < VGPU_TIME_INFINITY
    for inf in [None, "", "abc", keys.VGPU_TIME_DONE, "1" * 21]:
        assert vgpu_time_sort_key(inf) == VGPU_TIME_INFINITY
    assert vgpu_time_sort_key("18446744073709551614") < VGPU_TIME_INFINITY


def test_bind_phase():
    for v in ("allocating", "success", "failed"):
        assert decode_bind_phase(v) == v
    for bad in ("", "Success", "allocated", "success "):
        with pytest.raises(ProtocolError, match="volcano.sh/bind-phase"):
            decode_bind_phase(bad)
