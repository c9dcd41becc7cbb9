"""Hostile configuration text (issue 15; docs/configuration.md §2.2, §2.4): bounded work, clear errors.

Before: a 1.3 KB file of YAML aliases took 36 s and 5.5 GB to report its error (the error's
``(got …)`` expanded the value), a 5,000-digit integer raised ValueError out of PyYAML, and a MIG
``count: 100000000000`` was accepted.  The peak-memory check runs the parser in a subprocess and
reads ``resource.getrusage`` there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from vgpu.config import ConfigError
from vgpu.config.limits import MAX_CONFIG_BYTES, MAX_MIG_INSTANCES, MAX_SPLIT_COUNT, MAX_YAML_NODES
from vgpu.config.loader import log_warnings, parse_device_config, parse_node_config
from vgpu.config.model import OversizedNumber, format_config_value


def laughs(levels: int = 9, key: str = "deviceSplitCount") -> str:
    """The "billion laughs": each level an anchored list of nine aliases of the previous one."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]")
    return "\n".join([*lines, "nvidia:", f"  {key}: *l{levels - 1}", ""])


def error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_device_config(text, "/config/device-config.yaml")
    return str(info.value)


@pytest.mark.parametrize("key", ["deviceSplitCount", "knownMigGeometries", "resourceCountName"])
def test_billion_laughs_is_refused_at_once(key):
    text = laughs(key=key)
    start = time.perf_counter()
    message = error(text)
    assert time.perf_counter() - start < 2  # about 2 ms; before: 20 s and gigabytes
    assert message == (
        "vgpu: invalid configuration in /config/device-config.yaml: (file): not accepted: more than "
        f"{MAX_YAML_NODES} YAML nodes with its aliases expanded (each use of an alias counts its whole anchored value)"
    )


_PEAK = """
import resource, sys, time
from vgpu.config import ConfigError
from vgpu.config.loader import parse_device_config


def hwm():
    # VmHWM is this process's own peak (ru_maxrss may carry the forking parent's over exec).
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024


text = sys.stdin.read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, hwm()
start = time.perf_counter()
try:
    parse_device_config(text, "f")
except ConfigError:
    pass
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, hwm()
print(seconds, after[0] - before[0], after[1] - before[1], after[1])
"""


def test_billion_laughs_peak_memory_in_a_subprocess():
    out = subprocess.run(
        [sys.executable, "-c", _PEAK], input=laughs(), capture_output=True, text=True, timeout=60, check=True
    )
    seconds, maxrss_growth, hwm_growth, hwm = out.stdout.split()
    # About 2 ms, no growth, a 15 MiB process; before: MemoryError after 20 s at a 2 GiB cap.
    assert float(seconds) < 2 and int(maxrss_growth) < 10 and int(hwm_growth) < 10 and int(hwm) < 100, out.stdout


def test_anchors_within_the_limit_still_work():
    """Sharing one MIG layout between two entries is what anchors are for."""
    text = textwrap.dedent(
        """\
        nvidia:
          knownMigGeometries:
          - models: ["A30"]
            allowedGeometries: &layouts
            - group: group1
              geometries:
              - &one {name: 1g.6gb, memory: 6144, count: 4}
          - models: ["A30X"]
            allowedGeometries: *layouts
          deviceSplitCount: 4
        """
    )
    config, _ = parse_device_config(text, "f")
    first, second = config.known_mig_geometries
    assert first.groups == second.groups and first.groups[0].geometries[0].count == 4


def test_merge_keys_count_like_aliases():
    text = "base: &b {deviceSplitCount: 4}\nnvidia:\n  <<: *b\n  gpuMemoryFactor: 2\n"
    config, _ = parse_device_config(text, "f")
    assert config.device_split_count == 4 and config.gpu_memory_factor == 2


def test_a_recursive_alias_is_refused_with_its_line():
    assert "line 2, column 11: not accepted: a recursive YAML alias" in error("nvidia:\n  models: &a [*a]\n")


def test_more_nodes_than_the_limit_without_aliases_is_refused_too():
    text = "nvidia:\n  x: [" + ",".join(["1"] * (MAX_YAML_NODES + 1)) + "]\n"
    assert f"more than {MAX_YAML_NODES} YAML nodes" in error(text)


def test_a_file_larger_than_a_configmap_is_refused_unread():
    assert f"(file): is larger than {MAX_CONFIG_BYTES} bytes" in error("#" * (MAX_CONFIG_BYTES + 1))
    with pytest.raises(ConfigError, match="is larger than"):
        parse_node_config(" " * (MAX_CONFIG_BYTES + 1), "c.json", "n")


@pytest.mark.parametrize(
    ("body", "key", "reason"),
    [
        (f"deviceSplitCount: {'9' * 5000}", "nvidia.deviceSplitCount", f"must be between 1 and {MAX_SPLIT_COUNT}"),
        (f"gpuMemoryFactor: {'9' * 5000}", "nvidia.gpuMemoryFactor", "must be between 1 and 1048576"),
        (f"deviceCoreScaling: {'9' * 5000}.5", "nvidia.deviceCoreScaling", "must be a number <= 100"),
        (f"defaultMemory: -{'9' * 5000}", "nvidia.defaultMemory", "must be between -9223372036854775808 and"),
        (f"libCudaLogLevel: '{'1' * 5000}'", "nvidia.libCudaLogLevel", "must be between 0 and 4"),
        (f"resourceCountName: {'9' * 5000}", "nvidia.resourceCountName", "must be a string (quote it)"),
    ],
)
def test_a_5000_digit_number_names_file_and_key(body, key, reason):
    message = error(f"nvidia:\n  {body}\n")
    assert message.startswith(f"vgpu: invalid configuration in /config/device-config.yaml: {key}: {reason}")
    assert "characters)" in message or message.endswith("…)")  # the value is cut, never echoed whole
    assert len(message) < 250


def test_a_5000_digit_number_in_config_json_names_file_and_key():
    text = json.dumps({"nodeconfig": [{"name": "n", "devicesplitcount": 0}]}).replace("0}", "9" * 5000 + "}")
    with pytest.raises(ConfigError) as info:
        parse_node_config(text, "/config/config.json", "n")
    message = str(info.value)
    assert message.startswith("vgpu: invalid configuration in /config/config.json: nodeconfig[0].devicesplitcount: ")
    assert "(5000 characters)" in message and len(message) < 250


GEOMETRY = """\
nvidia:
  knownMigGeometries:
  - models: ["A30"]
    allowedGeometries:
    - group: group1
      geometries:
      - {name: 1g.6gb, memory: MEMORY, count: COUNT}
      - {name: 2g.12gb, memory: 12288, count: 2}
"""
TEMPLATE = "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries"


@pytest.mark.parametrize(
    ("memory", "count", "key", "reason"),
    [
        (6144, 100000000000, f"{TEMPLATE}[0].count", f"must be <= {MAX_MIG_INSTANCES} (got 100000000000)"),
        (6144, MAX_MIG_INSTANCES, TEMPLATE, f"must have at most {MAX_MIG_INSTANCES} instances in all"),
        (2**40, 1, f"{TEMPLATE}[0].memory", "must be <= 1048576"),
    ],
)
def test_mig_numbers_are_range_checked(memory, count, key, reason):
    message = error(GEOMETRY.replace("MEMORY", str(memory)).replace("COUNT", str(count)))
    assert f": {key}: {reason}" in message


@pytest.mark.parametrize(
    ("body", "key", "reason"),
    [
        (f"deviceSplitCount: {MAX_SPLIT_COUNT + 1}", "nvidia.deviceSplitCount", f"must be <= {MAX_SPLIT_COUNT}"),
        ("gpuMemoryFactor: 2097152", "nvidia.gpuMemoryFactor", "must be <= 1048576"),
        ("deviceCoreScaling: 1e300", "nvidia.deviceCoreScaling", "must be <= 100"),
        ("deviceMemoryScaling: 101", "nvidia.deviceMemoryScaling", "must be <= 100"),
        ("healthRecoverySeconds: 31536001", "nvidia.healthRecoverySeconds", "must be <= 31536000"),
        ("defaultGPUNum: 9223372036854775808", "nvidia.defaultGPUNum", "must be between"),
    ],
)
def test_every_number_has_a_maximum(body, key, reason):
    assert f": {key}: {reason}" in error(f"nvidia:\n  {body}\n")


@pytest.mark.parametrize(
    ("entry", "key", "reason"),
    [
        ({"devicesplitcount": MAX_SPLIT_COUNT + 1}, "devicesplitcount", f"must be <= {MAX_SPLIT_COUNT}"),
        ({"devicecorescaling": 1e300}, "devicecorescaling", "must be <= 100"),
        ({"filterdevices": {"index": [2**40]}}, "filterdevices.index[0]", "must be <= 65536"),
    ],
)
def test_config_json_numbers_have_maxima(entry, key, reason):
    text = json.dumps({"nodeconfig": [{"name": "n", **entry}]})
    with pytest.raises(ConfigError) as info:
        parse_node_config(text, "c.json", "n")
    assert f": nodeconfig[0].{key}: {reason}" in str(info.value)


def test_a_huge_unknown_key_is_cheap_and_shown_short():
    text = "nvidia:\n  ? " + "k" * 500_000 + "\n  : 1\n"  # an explicit key: a plain one stops at 1024
    start = time.perf_counter()
    _, warnings = parse_device_config(text, "f")
    assert time.perf_counter() - start < 3
    (warning,) = warnings
    assert len(warning) < 400 and "(500000 characters)" in warning


def test_warnings_are_logged_at_most_100_then_counted(caplog):
    with caplog.at_level("WARNING", logger="vgpu.config"):
        log_warnings([f"w{i}" for i in range(250)])
    assert (
        len(caplog.records) == 101 and caplog.records[-1].getMessage() == "configuration: 150 more warnings not shown"
    )


def test_values_are_rendered_without_expanding_them():
    shared: list[object] = ["lol"] * 9
    for _ in range(9):
        shared = [shared] * 9  # 9^10 leaves when expanded, 90 objects
    start = time.perf_counter()
    text = format_config_value(shared)
    assert time.perf_counter() - start < 1
    assert len(text) == 120 and text.endswith("…")
    loop: list[object] = []
    loop.append(loop)
    assert format_config_value(loop) == "[[…]]"
    assert format_config_value(OversizedNumber("12345", 5000)) == "12345… (5000 characters)"
    assert format_config_value(10**5000) == "<an integer of 16610 bits>"
