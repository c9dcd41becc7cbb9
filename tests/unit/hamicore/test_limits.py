"""libvgpu's env parsing, reproduced (docs/hami-core.md §3.2), and our emitters."""

from __future__ import annotations

import pytest

from vgpu.hamicore.limits import atoi, limits_from_env, memory_limit_env, parse_limit, sm_limit_env

M, G, K = 2**20, 2**30, 2**10


@pytest.mark.parametrize(
    "value,expected",
    [
        ("3000m", 3000 * M),
        ("3000M", 3000 * M),
        ("2g", 2 * G),
        ("4G", 4 * G),
        ("512k", 512 * K),
        ("512K", 512 * K),
        ("1048576", 1048576),  # no suffix = bytes
        ("010m", 8 * M),  # leading 0 = octal
        ("0x10m", 16 * M),  # 0x = hex
        ("1.5g", 1 * G),  # parsing stops at '.', the last char still picks the unit
        ("3Gi", 3),  # last char 'i' is not a suffix -> bytes
        ("0m", 0),
        ("", 0),
        ("abc", 0),
        ("08m", 0),
        ("99999999999999999999999", 0),  # strtoul overflow -> 0 = unlimited
        ("17179869184g", 0),  # multiplication overflow -> 0
        ("  42m", 42 * M),
    ],
)
def test_parse_limit_matches_libvgpu(value, expected):
    assert parse_limit(value) == expected


@pytest.mark.parametrize(
    "value,expected", [("0", 0), ("1", 1), (" -3", -3), ("+7x", 7), ("x", 0), ("", 0), ("2147483648", -2147483648)]
)
def test_atoi(value, expected):
    assert atoi(value) == expected


def test_limits_from_env_per_device_wins_when_positive():
    env = {
        "CUDA_DEVICE_MEMORY_LIMIT": "1g",
        "CUDA_DEVICE_MEMORY_LIMIT_1": "0m",
        "CUDA_DEVICE_MEMORY_LIMIT_2": "5m",
        "CUDA_DEVICE_SM_LIMIT": "0",
        "CUDA_DEVICE_SM_LIMIT_3": "25",
    }
    limits, sm = limits_from_env(env)
    assert limits[0] == G and limits[1] == G and limits[2] == 5 * M and limits[15] == G
    assert sm[3] == 25 and sm[0] == 100 and sm[15] == 100


@pytest.mark.parametrize("bad", [-1, 1.0, "3", True, None])
def test_emitters_reject_anything_but_non_negative_ints(bad):
    with pytest.raises(ValueError):
        memory_limit_env(bad)
    with pytest.raises(ValueError):
        sm_limit_env(bad)


def test_emitters():
    assert memory_limit_env(0) == "0m" and memory_limit_env(3000) == "3000m"
    assert sm_limit_env(0) == "0" and sm_limit_env(100) == "100"
