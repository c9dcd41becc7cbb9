"""Property tests (seeded random generators): encode → decode is the identity, and any single
character change to a valid value either decodes to values that round-trip or raises
ProtocolError — never another exception."""

from __future__ import annotations

import random
import string
import uuid as uuidlib

import pytest

from vgpu.protocol import (
    ContainerDevice,
    MigSlot,
    ProtocolError,
    RegisterRecord,
    consume_segment,
    decode_pod_devices,
    decode_register,
    encode_pod_devices,
    encode_register,
)

SEEDS = range(20)


def gpu_uuid(rng: random.Random) -> str:
    u = str(uuidlib.UUID(int=rng.getrandbits(128)))
    return "GPU-" + (u.upper() if rng.random() < 0.2 else u)


def rand_register(rng: random.Random) -> list[RegisterRecord]:
    names = ["NVIDIA A100-SXM4-80GB", "Tesla T4", "NVIDIA H200 141GB HBM3e", "NVIDIA GeForce RTX 3090", "A30"]
    return [
        RegisterRecord(
            gpu_uuid(rng),
            rng.randint(0, 1000),
            rng.randint(0, 2**40),
            "NVIDIA-" + rng.choice(names),
            rng.random() < 0.5,
            rng.choice(["hami-core", "mig"]),
        )
        for _ in range(rng.randint(1, 16))
    ]


def rand_pod(rng: random.Random) -> list[list[ContainerDevice]]:
    pod = []
    for _ in range(rng.randint(1, 8)):
        seg = []
        for _ in range(rng.randint(0, 8)):
            mig = None
            if rng.random() < 0.3:
                mig = MigSlot(rng.choice(["group1", "group2", "g", "grp_x.9"]), rng.randint(0, 12))
            seg.append(ContainerDevice(gpu_uuid(rng), rng.randint(0, 2**32 - 1), rng.randint(0, 100), mig))
        pod.append(seg)
    return pod


@pytest.mark.parametrize("seed", SEEDS)
def test_register_round_trip(seed):
    rng = random.Random(seed)
    records = rand_register(rng)
    value = encode_register(records)
    assert decode_register(value) == tuple(records)
    assert value.count(":") == len(records) and value.endswith(":") and " ," not in value


@pytest.mark.parametrize("seed", SEEDS)
def test_pod_devices_round_trip_and_consumption(seed):
    rng = random.Random(seed)
    pod = rand_pod(rng)
    value = encode_pod_devices(pod)
    assert decode_pod_devices(value) == tuple(tuple(s) for s in pod)
    assert value.count(";") == len(pod) - 1
    # consuming segments in random order only ever empties the consumed ones
    order = list(range(len(pod)))
    rng.shuffle(order)
    done: set[int] = set()
    for i in order:
        value = consume_segment(value, i)
        done.add(i)
        decoded = decode_pod_devices(value)
        assert decoded == tuple(() if k in done else tuple(s) for k, s in enumerate(pod))


MUTATION_ALPHABET = string.ascii_letters + string.digits + ",:;[]- _.+\x00é８"


def mutate(rng: random.Random, text: str) -> str:
    i = rng.randrange(len(text) + 1)
    op = rng.choice(["insert", "delete", "replace"])
    c = rng.choice(MUTATION_ALPHABET)
    if op == "insert" or not text:
        return text[:i] + c + text[i:]
    i = min(i, len(text) - 1)
    return text[:i] + ("" if op == "delete" else c) + text[i + 1 :]


@pytest.mark.parametrize("seed", SEEDS)
def test_mutations_never_escape_as_other_exceptions(seed):
    rng = random.Random(seed)
    reg = encode_register(rand_register(rng))
    pod = encode_pod_devices(rand_pod(rng))
    for _ in range(300):
        bad = mutate(rng, reg)
        try:
            out = decode_register(bad)
        except ProtocolError:
            pass
        else:
            # accepted ⇒ it re-encodes to a value with the same meaning (the grammar's 1*DIGIT
            # allows leading zeros, which the encoder never writes)
            assert decode_register(encode_register(out)) == out
            assert encode_register(out) == bad or bad.count(":") == len(out)
        bad = mutate(rng, pod)
        try:
            outp = decode_pod_devices(bad)
        except ProtocolError:
            pass
        else:
            assert decode_pod_devices(encode_pod_devices(outp)) == outp
