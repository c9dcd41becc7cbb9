"""Annotation codec hot paths: the plugin decodes ``devices-to-allocate`` on every Allocate and the
register annotation on every node event; the scheduler emulator does both per cycle.

Baseline (same run): a straightforward regex decoder — per-segment ``fullmatch`` for validation,
then ``finditer`` with per-match group access — and a ``+=`` string-building encoder, producing the
same dataclasses with the same strict checks. Our codec does one C-level grammar match plus one
``findall`` per segment and measures 1.0–1.1× the baseline: most of the time on both sides is
building the frozen dataclasses. So this is a parity check, not a claimed speed-up: the gate
(≥ 0.6×) fails a change that makes the codec clearly slower than the naive one, while tolerating
the ±30 % phase-to-phase noise seen on shared 2-core CI machines.
"""

from __future__ import annotations

import random
import re
import uuid as uuidlib

from benchmarks.conftest import ratio_gate, rounds
from vgpu.protocol import (
    ContainerDevice,
    MigSlot,
    RegisterRecord,
    decode_pod_devices,
    decode_register,
    encode_pod_devices,
    encode_register,
)

_rng = random.Random(7)
UUIDS = ["GPU-" + str(uuidlib.UUID(int=_rng.getrandbits(128))) for _ in range(8)]
POD = [[ContainerDevice(u, 3000 + 7 * c, 25) for u in UUIDS] for c in range(8)]  # 8 containers × 8 GPUs
RECORDS = [RegisterRecord(u, 10, 81920, "NVIDIA-NVIDIA A100-SXM4-80GB", True, "hami-core") for u in UUIDS]
POD_VALUE = encode_pod_devices(POD)
REGISTER_VALUE = encode_register(RECORDS)

# --- baseline ---
_DEV = r"(GPU-[0-9A-Fa-f-]{36})(?:\[([^\[\]\-,:;]+)-([0-9]+)\])?,NVIDIA,([0-9]+),([0-9]+):"
_SEG_RE = re.compile(f"(?:{_DEV})*")
_DEV_RE = re.compile(_DEV)
_REC = r"(GPU-[0-9A-Fa-f-]{36}),([0-9]+),([0-9]+),(NVIDIA-[^,:]+),(true|false),(hami-core|mig):"
_REG_RE = re.compile(f"(?:{_REC})+")
_REC_RE = re.compile(_REC)


def naive_decode_pod(value: str):
    out = []
    for seg in value.split(";"):
        if not _SEG_RE.fullmatch(seg):
            raise ValueError(seg)
        devs = []
        for m in _DEV_RE.finditer(seg):
            mem, cores = int(m.group(4)), int(m.group(5))
            if mem > 2**32 - 1 or cores > 100:
                raise ValueError(seg)
            mig = None if m.group(2) is None else MigSlot(m.group(2), int(m.group(3)))
            devs.append(ContainerDevice(m.group(1), mem, cores, mig))
        out.append(tuple(devs))
    return tuple(out)


def naive_encode_pod(pod) -> str:
    segs = []
    for ctr in pod:
        s = ""
        for d in ctr:
            if not 0 <= d.usedmem <= 2**32 - 1 or not 0 <= d.usedcores <= 100:
                raise ValueError(d)
            s += d.device_id + ",NVIDIA," + str(d.usedmem) + "," + str(d.usedcores) + ":"
        segs.append(s)
    return ";".join(segs)


def naive_decode_register(value: str):
    if not _REG_RE.fullmatch(value):
        raise ValueError(value)
    out = []
    for m in _REC_RE.finditer(value):
        out.append(
            RegisterRecord(m.group(1), int(m.group(2)), int(m.group(3)), m.group(4), m.group(5) == "true", m.group(6))
        )
    return tuple(out)


def naive_encode_register(records) -> str:
    s = ""
    for r in records:
        s += (
            r.uuid
            + ","
            + str(r.count)
            + ","
            + str(r.devmem)
            + ","
            + r.type
            + ","
            + ("true" if r.health else "false")
            + ","
            + r.mode
            + ":"
        )
    if not _REG_RE.fullmatch(s):
        raise ValueError(s)
    return s


def test_baselines_agree():
    assert naive_decode_pod(POD_VALUE) == decode_pod_devices(POD_VALUE)
    assert naive_encode_pod(POD) == POD_VALUE
    assert naive_decode_register(REGISTER_VALUE) == decode_register(REGISTER_VALUE)
    assert naive_encode_register(RECORDS) == REGISTER_VALUE


def test_devices_to_allocate_8x8(benchmark):
    ratio_gate(
        benchmark,
        lambda: encode_pod_devices(decode_pod_devices(POD_VALUE)),
        lambda: naive_encode_pod(naive_decode_pod(POD_VALUE)),
        "protocol.devices_to_allocate",
        what="devices-to-allocate 8x8 decode+encode",
        n=rounds(2000),
    )


def test_register_8_gpus(benchmark):
    ratio_gate(
        benchmark,
        lambda: encode_register(decode_register(REGISTER_VALUE)),
        lambda: naive_encode_register(naive_decode_register(REGISTER_VALUE)),
        "protocol.register",
        what="register 8 GPUs decode+encode",
        n=rounds(2000),
    )
