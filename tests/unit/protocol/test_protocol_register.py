"""Register annotation: golden strings, strict grammar, and what each Volcano version accepts."""

from __future__ import annotations

import pytest

from vgpu.protocol import (
    ProtocolError,
    RegisterRecord,
    decode_register,
    decode_register_as_volcano,
    encode_register,
    register_devmem,
    register_records,
    register_type,
)

UUID0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
UUID1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"
A100 = "NVIDIA-NVIDIA A100-SXM4-80GB"
# docs/protocol.md §2.1 example, byte for byte.
SPEC_EXAMPLE = (
    "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e,10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
    "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c,10,81920,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
)


def rec(uuid=UUID0, count=10, devmem=81920, typ=A100, health=True, mode="hami-core"):
    return RegisterRecord(uuid, count, devmem, typ, health, mode)


def test_spec_example_encodes_byte_for_byte():
    # 80 GiB A100: NVML reports 85899345920 bytes = 81920 MiB.
    records = [
        rec(UUID0, devmem=register_devmem(85899345920, 1), typ=register_type("NVIDIA A100-SXM4-80GB")),
        rec(UUID1, devmem=register_devmem(85899345920, 1), typ=register_type("NVIDIA A100-SXM4-80GB")),
    ]
    assert encode_register(records) == SPEC_EXAMPLE
    assert decode_register(SPEC_EXAMPLE) == tuple(records)


def test_records_sorted_by_minor():
    a, b = rec(UUID0), rec(UUID1)
    assert encode_register([b, a], minors=[1, 0]) == SPEC_EXAMPLE
    assert register_records([(5, b), (2, a)]) == SPEC_EXAMPLE
    with pytest.raises(ValueError):
        encode_register([a, b], minors=[0])


def test_devmem_and_type_helpers():
    assert register_devmem(85899345920, 1) == 81920
    assert register_devmem(85899345920, 3) == 27306  # floor(81920 / 3)
    assert register_devmem(1048575, 1) == 0  # floor of MiB first
    assert register_type("Odd,Name:x") == "NVIDIA-Odd_Name_x"
    with pytest.raises(ValueError):
        register_devmem(1, 0)


def test_unhealthy_and_mig_fields():
    v = encode_register([rec(health=False, mode="mig")])
    assert v == f"{UUID0},10,81920,{A100},false,mig:"
    assert decode_register(v)[0].health is False
    assert decode_register(v)[0].mode == "mig"


@pytest.mark.parametrize(
    "value, where, fragment",
    [
        ("", "", "no GPU records"),
        (SPEC_EXAMPLE[:-1], "record 1", 'not terminated by ":"'),
        (SPEC_EXAMPLE + ":", "record 2", "empty record"),
        (":" + SPEC_EXAMPLE, "record 0", "empty record"),
        (f"{UUID0},10,81920,{A100},true:", "record 0", "has 5 fields"),
        (f"{UUID0},10,81920,{A100},true,hami-core,x:", "record 0", "has 7 fields"),
        (f"GPU-123,10,81920,{A100},true,hami-core:", "record 0, field uuid", "36 hex"),
        (f"{UUID0.replace('c', 'g')},10,81920,{A100},true,hami-core:", "record 0, field uuid", "36 hex"),
        (f"{UUID0},-1,81920,{A100},true,hami-core:", "record 0, field count", "not a decimal integer"),
        (f"{UUID0},1x,81920,{A100},true,hami-core:", "record 0, field count", "not a decimal integer"),
        (f"{UUID0},10,８１,{A100},true,hami-core:", "record 0, field devmem", "not a decimal integer"),
        (f"{UUID0},10,,{A100},true,hami-core:", "record 0, field devmem", "not a decimal integer"),
        (f"{UUID0},10,99999999999999999999,{A100},true,hami-core:", "record 0, field devmem", "decimal"),
        (f"{UUID0},10,81920,Tesla T4,true,hami-core:", "record 0, field type", "NVIDIA-"),
        (f"{UUID0},10,81920,NVIDIA-,true,hami-core:", "record 0, field type", "NVIDIA-"),
        (f"{UUID0},10,81920,{A100},True,hami-core:", "record 0, field health", '"true" or "false"'),
        (f"{UUID0},10,81920,{A100},true,mps:", "record 0, field mode", '"hami-core" or "mig"'),
        (f"{UUID0}, 10,81920,{A100},true,hami-core:", "record 0, field count", "decimal"),
    ],
)
def test_strict_decoder_rejects_malformed(value, where, fragment):
    with pytest.raises(ProtocolError) as exc:
        decode_register(value)
    err = exc.value
    assert err.annotation == "volcano.sh/node-vgpu-register"
    assert err.where == where
    assert fragment in str(err)
    assert str(err).startswith("volcano.sh/node-vgpu-register")


@pytest.mark.parametrize(
    "bad, field",
    [
        (rec(uuid="GPU-x"), "uuid"),
        (rec(count=-1), "count"),
        (rec(devmem=True), "devmem"),
        (rec(typ="NVIDIA-A,B"), "type"),
        (rec(typ="AMD-MI300"), "type"),
        (rec(mode="mps"), "mode"),
        (rec(health="true"), "health"),
    ],
)
def test_encoder_refuses_what_would_not_decode(bad, field):
    with pytest.raises(ProtocolError) as exc:
        encode_register([rec(UUID1), bad])
    assert exc.value.where == f"record 1, field {field}"
    with pytest.raises(ValueError):
        encode_register([])


# --- the Volcano decoders (R-1: our annotation decodes on every version) ---


@pytest.mark.parametrize("min_fields", [5, 6])
def test_our_annotation_decodes_on_every_volcano(min_fields):
    view = decode_register_as_volcano(SPEC_EXAMPLE, min_fields=min_fields)
    assert [(g.id, g.uuid, g.number, g.memory, g.type) for g in view.devices] == [
        (0, UUID0, 10, 81920, A100),
        (1, UUID1, 10, 81920, A100),
    ]
    assert view.mode == "hami-core"


def test_five_field_records_rejected_from_v1_12():
    legacy = f"{UUID0},10,81920,{A100},true:{UUID1},10,81920,{A100},true:"
    assert len(decode_register_as_volcano(legacy, min_fields=5).devices) == 2
    with pytest.raises(ProtocolError, match="wrong Node GPU info"):
        decode_register_as_volcano(legacy, min_fields=6)


def test_volcano_leniency():
    # no ':' at all → no devices; Atoi errors → 0; extra fields ignored; junk segments keep their id
    assert decode_register_as_volcano("garbage", min_fields=6).devices == ()
    v = f"junk:{UUID0},x,-0,{A100},maybe,mig,extra:"
    view = decode_register_as_volcano(v, min_fields=6)
    (g,) = view.devices
    assert (g.id, g.number, g.memory, g.health, g.mode) == (1, 0, 0, False, "mig")
    assert view.mode == "mig"


def test_volcano_node_mode_is_last_record_and_pre_v1_12_has_no_mig():
    v = encode_register([rec(UUID0, mode="mig"), rec(UUID1, mode="hami-core")])
    assert decode_register_as_volcano(v).mode == "hami-core"
    v = encode_register([rec(UUID0, mode="hami-core"), rec(UUID1, mode="mig")])
    assert decode_register_as_volcano(v).mode == "mig"
    assert decode_register_as_volcano(v, min_fields=5).mode == "hami-core"
    assert decode_register_as_volcano(v, min_fields=5).devices[1].mode == "hami-core"


def test_volcano_negative_count_wraps_like_go_uint():
    v = f"{UUID0},-1,5,{A100},1,hami-core:"
    g = decode_register_as_volcano(v).devices[0]
    assert g.number == 2**64 - 1
    assert g.health is True
