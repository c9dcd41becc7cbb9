"""Property-based fuzzing of every decoder in vgpu/protocol (issue 15: hostile text is normal input).

Random text (with the characters the grammars care about, non-ASCII digits such as ``２`` and
``²``, and runs of thousands of digits) and mutated valid values either decode or raise
:class:`ProtocolError` — never another exception; the lenient ``*_as_volcano`` readers and the
sort keys never raise at all; and what decodes re-encodes to a value that decodes the same
(encode(decode(x)) round-trips).  Examples are bounded and derandomized so the file runs in a few
seconds and the same way every time.
"""

from __future__ import annotations

import re
import string
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vgpu.protocol import (
    ContainerDevice,
    MigSlot,
    ProtocolError,
    RegisterRecord,
    consume_segment,
    decode_bind_phase,
    decode_container_devices,
    decode_handshake,
    decode_node_lock,
    decode_pod_devices,
    decode_pod_devices_as_volcano,
    decode_register,
    decode_register_as_volcano,
    decode_vgpu_time,
    encode_node_lock,
    encode_pod_devices,
    encode_register,
    encode_reported,
    encode_requesting,
    keys,
    parse_mig_id_as_volcano,
    vgpu_time_sort_key,
    volcano_handshake_state,
    volcano_requesting_stamp,
)
from vgpu.protocol._fields import go_atoi, parse_decimal
from vgpu.protocol.pod_model import ResourceNames, pod_view, whole_quantity

FUZZ = settings(
    max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)

# Characters the grammars split on or test for, ASCII and not (fullwidth, superscript, Arabic-Indic digits).
SPECIAL = ",:;[]-_+. TZmeE" + "０１２３４５６７８９²٣" + "\x00\n\t\u00a0é"
TEXT = st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + SPECIAL), max_size=80)
DIGIT_RUN = st.integers(min_value=19, max_value=6000).map(lambda n: "9" * n)
NAMES = ResourceNames("volcano.sh/vgpu-number", "volcano.sh/vgpu-memory", "volcano.sh/vgpu-cores")

HEX = "0123456789abcdefABCDEF"
UUIDS = st.text(alphabet=st.sampled_from(HEX), min_size=32, max_size=32).map(
    lambda h: f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
)


@st.composite
def mutated(draw: st.DrawFn, valid: st.SearchStrategy[str]) -> str:
    """A valid value with a few edits: replace, insert, delete characters, or splice in a digit run."""
    text = draw(valid)
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        op = draw(st.sampled_from(["replace", "insert", "delete", "digits", "widen", "unicode"]))
        at = draw(st.integers(min_value=0, max_value=len(text)))
        if op == "replace" and text:
            at = min(at, len(text) - 1)
            text = text[:at] + draw(st.sampled_from(string.printable + SPECIAL)) + text[at + 1 :]
        elif op == "insert":
            text = text[:at] + draw(st.sampled_from(string.printable + SPECIAL)) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + 1 :]
        elif op == "digits":
            text = text[:at] + draw(DIGIT_RUN) + text[at:]
        elif op == "widen":  # a number field becomes thousands of digits (int() refuses > 4,300)
            runs = [m.span() for m in re.finditer("[0-9]+", text)]
            if runs:
                a, b = draw(st.sampled_from(runs))
                text = text[:a] + draw(DIGIT_RUN) + text[b:]
        else:  # a digit replaced by its fullwidth twin
            digits = [i for i, c in enumerate(text) if c.isascii() and c.isdigit()]
            if digits:
                i = draw(st.sampled_from(digits))
                text = text[:i] + chr(ord(text[i]) - ord("0") + ord("０")) + text[i + 1 :]
    return text


def strict(decode: Any, value: str) -> Any:
    """Decode or ProtocolError (returned as None); any other exception fails the test."""
    try:
        return decode(value)
    except ProtocolError:
        return None


# ---------------------------------------------------------------- register

RECORDS = st.lists(
    st.builds(
        RegisterRecord,
        uuid=UUIDS,
        count=st.integers(min_value=0, max_value=2**63 - 1),
        devmem=st.integers(min_value=0, max_value=2**63 - 1),
        type=st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + " -_"), min_size=1).map(
            lambda n: "NVIDIA-" + n
        ),
        health=st.booleans(),
        mode=st.sampled_from(keys.MODES),
    ),
    min_size=1,
    max_size=4,
)
REGISTER = RECORDS.map(encode_register)


@FUZZ
@given(st.one_of(TEXT, REGISTER, mutated(REGISTER)))
def test_register(value):
    got = strict(decode_register, value)
    if got is not None:
        assert decode_register(encode_register(got)) == got
    for min_fields in (5, 6):
        strict(lambda v, m=min_fields: decode_register_as_volcano(v, min_fields=m), value)


@FUZZ
@given(RECORDS)
def test_register_round_trip(records):
    assert decode_register(encode_register(records)) == tuple(records)


# ---------------------------------------------------------------- pod devices

DEVICES = st.builds(
    ContainerDevice,
    uuid=UUIDS,
    usedmem=st.integers(min_value=0, max_value=2**32 - 1),
    usedcores=st.integers(min_value=0, max_value=100),
    mig=st.none()
    | st.builds(
        MigSlot,
        group=st.text(alphabet=st.sampled_from(string.ascii_letters + string.digits + "_."), min_size=1, max_size=8),
        position=st.integers(min_value=0, max_value=2**40),
    ),
)
POD_DEVICES = st.lists(st.lists(DEVICES, max_size=3), min_size=1, max_size=3)
POD_DEVICES_TEXT = POD_DEVICES.map(encode_pod_devices)


@FUZZ
@given(st.one_of(TEXT, POD_DEVICES_TEXT, mutated(POD_DEVICES_TEXT)))
def test_pod_devices(value):
    got = strict(decode_pod_devices, value)
    if got is not None:
        assert encode_pod_devices(got) == encode_pod_devices(decode_pod_devices(encode_pod_devices(got)))
        assert decode_pod_devices(encode_pod_devices(got)) == got
    strict(decode_container_devices, value)
    strict(lambda v: consume_segment(v, 1), value)
    for strict_devices in (True, False):
        decode_pod_devices_as_volcano(value, strict_devices=strict_devices)  # never raises
    for part in value.split(":"):
        parse_mig_id_as_volcano(part)  # never raises


@FUZZ
@given(POD_DEVICES)
def test_pod_devices_round_trip(pod):
    assert decode_pod_devices(encode_pod_devices(pod)) == tuple(tuple(c) for c in pod)


# ---------------------------------------------------------------- handshake, node lock

AWARE = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)).map(
    lambda t: t.astimezone(UTC)
)
OFFSETS = st.integers(min_value=-23 * 60 - 59, max_value=23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
HANDSHAKES = st.one_of(
    AWARE.map(encode_reported),
    st.datetimes(min_value=datetime(1000, 1, 1)).map(encode_requesting),
    st.datetimes(min_value=datetime(1000, 1, 1)).map(lambda t: "Deleted_" + encode_requesting(t)[len("Requesting_") :]),
)


@FUZZ
@given(
    st.one_of(
        TEXT.map(lambda t: "Reported " + t), TEXT.map(lambda t: "Requesting_" + t), HANDSHAKES, mutated(HANDSHAKES)
    )
)
def test_handshake(value):
    got = strict(decode_handshake, value)
    if got is not None and got.kind == "Reported" and got.time.year > 1:
        again = decode_handshake(encode_reported(got.time))
        assert again.time == got.time
    volcano_handshake_state(value)  # never raises
    volcano_requesting_stamp(value)


@FUZZ
@given(AWARE)
def test_handshake_round_trip(t):
    got = decode_handshake(encode_reported(t))
    assert got.kind == "Reported" and got.time == t


LOCKS = st.builds(
    lambda t, tz: encode_node_lock(t.replace(microsecond=0, tzinfo=None).replace(tzinfo=tz)),
    st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 1, 1)),
    OFFSETS,
)


@FUZZ
@given(st.one_of(TEXT, LOCKS, mutated(LOCKS)))
def test_node_lock(value):
    got = strict(decode_node_lock, value)
    if got is not None and got.microsecond == 0:
        try:
            text = encode_node_lock(got)
        except ValueError:
            return
        assert decode_node_lock(text) == got


@FUZZ
@given(st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 1, 1)), OFFSETS)
def test_node_lock_round_trip(t, tz):
    aware = t.replace(microsecond=0, tzinfo=tz)
    assert decode_node_lock(encode_node_lock(aware)) == aware


def test_thousands_of_digits_are_refused_everywhere():
    """``int()`` raises ValueError past 4,300 digits: every number field is length-bounded first."""
    big = "9" * 5000
    uuid = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
    for decode, value in [
        (decode_register, f"{uuid},{big},81920,NVIDIA-A100,true,hami-core:"),
        (decode_register, f"{uuid},10,{big},NVIDIA-A100,true,hami-core:"),
        (decode_pod_devices, f"{uuid},NVIDIA,{big},50:"),
        (decode_pod_devices, f"{uuid},NVIDIA,3000,{big}:"),
        (decode_pod_devices, f"{uuid}[g-{big}],NVIDIA,3000,50:"),
        (decode_vgpu_time, big),
    ]:
        assert strict(decode, value) is None, value[:60]
    assert decode_pod_devices(f"{uuid}[g-{'0' * 5000}7],NVIDIA,1,2:")[0][0].mig == MigSlot("g", 7)
    assert decode_register_as_volcano(f"{uuid},{big},{big},NVIDIA-A100,true,mig:").devices[0].number == 0
    assert decode_register_as_volcano(f"{uuid},{'0' * 5000}3,1,NVIDIA-A100,true,mig:").devices[0].number == 3
    assert decode_pod_devices_as_volcano(f"a,NVIDIA,{big},2:", strict_devices=False)[0][0][0].usedmem == 0
    assert decode_pod_devices_as_volcano(f"a,NVIDIA,{big},2:", strict_devices=True)[0] == ((),)
    assert parse_mig_id_as_volcano(f"GPU-x[g-{big}]") is None
    assert go_atoi("-9223372036854775808") == -(2**63) and go_atoi("9223372036854775808") is None


def test_unicode_digits_are_refused_everywhere():
    """``int()`` and ``\\d`` accept ``２０２６``; the grammars say ASCII 0-9 (docs/protocol.md §2)."""
    for decode, value in [
        (decode_handshake, "Reported ２０２６-01-02 03:04:05.000000000 +0000 UTC"),
        (decode_handshake, "Reported 2026-01-02 03:04:0５ +0000 UTC"),
        (decode_handshake, "Requesting_２０２６.01.02 03:04:05"),
        (decode_handshake, "Deleted_2026.01.02 03:04:0٣"),
        (decode_node_lock, "２０２６-08-20T10:07:21Z"),
        (decode_node_lock, "2026-08-20T10:07:21+0８:00"),
        (decode_vgpu_time, "１７８４８８４８６３"),
        (decode_register, "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e,１０,81920,NVIDIA-A100,true,hami-core:"),
        (decode_pod_devices, "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e,NVIDIA,３000,50:"),
        (decode_pod_devices, "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e[g-²],NVIDIA,3000,50:"),
    ]:
        assert strict(decode, value) is None, value
    assert volcano_requesting_stamp("Requesting_２０２６.01.02 03:04:05").year == 1  # Go's zero time
    assert vgpu_time_sort_key("１７８４８８４８６３") == 2**64
    assert go_atoi("１２") is None and parse_decimal("１２", 99) is None
    assert parse_mig_id_as_volcano("GPU-x[g-１]") is None
    assert isinstance(whole_quantity("１"), str)
    assert decode_pod_devices_as_volcano("a,NVIDIA,１,2:", strict_devices=True)[0] == ((),)


# ---------------------------------------------------------------- scalars

TIMES = st.integers(min_value=0, max_value=2**64 - 1).map(str)


@FUZZ
@given(st.one_of(TEXT, TIMES, mutated(TIMES), DIGIT_RUN))
def test_vgpu_time_and_bind_phase(value):
    got = strict(decode_vgpu_time, value)
    if got is not None:
        assert decode_vgpu_time(str(got)) == got and vgpu_time_sort_key(value) in (got, 2**64)
    vgpu_time_sort_key(value)
    strict(decode_bind_phase, value)


@FUZZ
@given(st.one_of(TEXT, DIGIT_RUN, st.integers(min_value=-(2**70), max_value=2**70).map(str)))
def test_go_atoi_and_parse_decimal(value):
    got = go_atoi(value)
    if got is not None:
        assert -(2**63) <= got < 2**63 and go_atoi(str(got)) == got
    d = parse_decimal(value, 2**32 - 1)
    if d is not None:
        assert 0 <= d < 2**32 and parse_decimal(str(d), 2**32 - 1) == d


QUANTITIES = st.one_of(
    st.integers(min_value=0, max_value=2**63 - 1).map(str),
    st.builds(
        lambda n, s: f"{n}{s}", st.integers(0, 10**6), st.sampled_from(["", "k", "M", "Ki", "Gi", "e3", "E-2", "m"])
    ),
)


@FUZZ
@given(st.one_of(TEXT, QUANTITIES, mutated(QUANTITIES)))
def test_quantities_and_pod_views(value):
    got = whole_quantity(value)
    if isinstance(got, int):
        assert 0 <= got < 2**63 and whole_quantity(str(got)) == got
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "annotations": {keys.DEVICES_TO_ALLOCATE: value}},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {NAMES.count: value, NAMES.memory: "1"}}}]},
    }
    view = pod_view(pod, NAMES)
    assert (view.limit_problem is None) == isinstance(got, int)
    decoded = view.to_allocate
    assert isinstance(decoded, (tuple, ProtocolError))
