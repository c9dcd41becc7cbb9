"""Per-node `config.json` (docs/configuration.md §3): matching, type checks, ranges, warnings."""

from __future__ import annotations

import json

import pytest

from vgpu.config import ConfigError, FilterDevices, NodeConfig
from vgpu.configfiles import load_node_config

NODE = "gpu-node-1"


def write_nodes(write_file, *entries: dict, extra: dict | None = None):
    document = {"nodeconfig": list(entries)}
    document.update(extra or {})
    return write_file(json.dumps(document), "config.json")


def test_matching_entry_with_every_key(write_file):
    path = write_nodes(
        write_file,
        {"name": "other", "devicesplitcount": 3},
        {
            "name": NODE,
            "operatingmode": "mig",
            "devicesplitcount": 7,
            "devicecorescaling": 1.5,
            "devicememoryscaling": 1,
            "migstrategy": "none",
            "libcudaloglevel": 2,
            "filterdevices": {"uuid": ["GPU-aaa", "GPU-bbb"], "index": [0, 3]},
        },
    )
    config, warnings = load_node_config(path, NODE)
    assert warnings == []
    assert config == NodeConfig(
        name=NODE,
        operating_mode="mig",
        device_split_count=7,
        device_core_scaling=1.5,
        lib_cuda_log_level=2,
        filter_devices=FilterDevices(uuids=frozenset({"GPU-aaa", "GPU-bbb"}), indices=frozenset({0, 3})),
        source=str(path),
    )
    assert config.matched


def test_spec_example_file(write_file):
    path = write_file(
        """\
        {"nodeconfig": [
          {"name": "gpu-node-1", "operatingmode": "hami-core", "devicesplitcount": 10,
           "devicecorescaling": 1, "devicememoryscaling": 1, "migstrategy": "none",
           "libcudaloglevel": 2, "filterdevices": {"uuid": [], "index": []}}
        ]}
        """,
        "config.json",
    )
    config, warnings = load_node_config(path, NODE)
    assert warnings == []
    assert (config.operating_mode, config.device_split_count, config.device_core_scaling) == ("hami-core", 10, 1.0)
    assert config.filter_devices == FilterDevices()


def test_only_exact_name_matches(write_file):
    path = write_nodes(
        write_file, {"name": "GPU-NODE-1", "devicesplitcount": 3}, {"name": "gpu-node-10", "devicesplitcount": 4}
    )
    config, warnings = load_node_config(path, NODE)
    assert config == NodeConfig(source=str(path))
    assert not config.matched and warnings == []


def test_zero_means_no_override_and_empty_mode_is_hami_core(write_file):
    path = write_nodes(write_file, {"name": NODE, "devicesplitcount": 0, "devicecorescaling": 0, "operatingmode": ""})
    config, warnings = load_node_config(path, NODE)
    assert (config.device_split_count, config.device_core_scaling, config.operating_mode) == (None, None, "hami-core")
    assert warnings == []


def test_negative_overrides_are_ignored_with_a_warning(write_file):
    path = write_nodes(write_file, {"name": NODE, "devicesplitcount": -2, "devicecorescaling": -1})
    config, warnings = load_node_config(path, NODE)
    assert (config.device_split_count, config.device_core_scaling) == (None, None)
    assert len(warnings) == 2
    assert "nodeconfig[0].devicesplitcount: -2 is negative" in warnings[0]


def test_null_values_mean_not_set(write_file):
    path = write_nodes(
        write_file,
        {"name": NODE, "devicesplitcount": None, "operatingmode": None, "libcudaloglevel": None, "filterdevices": None},
    )
    config, warnings = load_node_config(path, NODE)
    assert config == NodeConfig(name=NODE, source=str(path))
    assert warnings == []


def test_keys_match_case_insensitively_like_go(write_file):
    path = write_nodes(
        write_file, {"Name": NODE, "deviceSplitCount": 5, "OperatingMode": "mig", "filterDevices": {"UUID": ["GPU-x"]}}
    )
    config, warnings = load_node_config(path, NODE)
    assert (config.device_split_count, config.operating_mode) == (5, "mig")
    assert config.filter_devices.uuids == {"GPU-x"}
    assert warnings == []


def test_numeric_string_log_level(write_file):
    config, _ = load_node_config(write_nodes(write_file, {"name": NODE, "libcudaloglevel": "4"}), NODE)
    assert config.lib_cuda_log_level == 4


def test_non_matching_entries_are_not_range_checked(write_file):
    path = write_nodes(
        write_file,
        {
            "name": "other",
            "operatingmode": "static",
            "devicesplitcount": -5,
            "libcudaloglevel": 9,
            "devicecorescaling": 0.001,
            "filterdevices": {"index": [-1], "uuid": [""]},
            "gpumemoryfactor": 4,
            "bogus": 1,
        },
        {"name": NODE},
    )
    config, warnings = load_node_config(path, NODE)
    assert config == NodeConfig(name=NODE, source=str(path))
    assert warnings == []  # warnings concern this node's entry only


# -- errors -----------------------------------------------------------------------------------

INVALID_TYPES = [
    ({"name": 5}, "nodeconfig[0].name", "must be a string (got 5)"),
    ({"name": "other", "devicesplitcount": "10"}, "nodeconfig[0].devicesplitcount", 'must be an integer (got "10")'),
    ({"name": "other", "devicesplitcount": True}, "nodeconfig[0].devicesplitcount", "must be an integer (got true)"),
    ({"name": "other", "devicesplitcount": 10.0}, "nodeconfig[0].devicesplitcount", "must be an integer (got 10.0)"),
    ({"name": "other", "devicecorescaling": "1"}, "nodeconfig[0].devicecorescaling", 'must be a number (got "1")'),
    (
        {"name": "other", "devicememoryscaling": False},
        "nodeconfig[0].devicememoryscaling",
        "must be a number (got false)",
    ),
    ({"name": "other", "operatingmode": 1}, "nodeconfig[0].operatingmode", "must be a string (got 1)"),
    ({"name": "other", "migstrategy": []}, "nodeconfig[0].migstrategy", "must be a string (got [])"),
    (
        {"name": "other", "libcudaloglevel": "high"},
        "nodeconfig[0].libcudaloglevel",
        'must be an integer or a numeric string (got "high")',
    ),
    ({"name": "other", "filterdevices": []}, "nodeconfig[0].filterdevices", "must be an object (got [])"),
    (
        {"name": "other", "filterdevices": {"uuid": "GPU-1"}},
        "nodeconfig[0].filterdevices.uuid",
        'must be an array (got "GPU-1")',
    ),
    (
        {"name": "other", "filterdevices": {"uuid": [1]}},
        "nodeconfig[0].filterdevices.uuid[0]",
        "must be a string (got 1)",
    ),
    (
        {"name": "other", "filterdevices": {"index": ["0"]}},
        "nodeconfig[0].filterdevices.index[0]",
        'must be an integer (got "0")',
    ),
    (
        {"name": "other", "filterdevices": {"index": [True]}},
        "nodeconfig[0].filterdevices.index[0]",
        "must be an integer (got true)",
    ),
    ("not an object", "nodeconfig[0]", 'must be an object (got "not an object")'),
]


@pytest.mark.parametrize(("entry", "key", "reason"), INVALID_TYPES, ids=range(len(INVALID_TYPES)))
def test_wrong_json_types_are_errors_in_any_entry(write_file, entry, key, reason):
    path = write_nodes(write_file, entry, {"name": NODE})
    with pytest.raises(ConfigError) as info:
        load_node_config(path, NODE)
    assert str(info.value) == f"vgpu: invalid configuration in {path}: {key}: {reason}"


INVALID_MATCHING = [
    (
        {"operatingmode": "static"},
        "operatingmode",
        'must be "hami-core" or "mig" (or empty for hami-core) (got "static")',
    ),
    ({"operatingmode": "MIG"}, "operatingmode", 'must be "hami-core" or "mig"'),
    ({"devicecorescaling": 0.005}, "devicecorescaling", "int(100 × value) >= 1) (got 0.005)"),
    ({"libcudaloglevel": 5}, "libcudaloglevel", "must be between 0 and 4 (got 5)"),
    ({"libcudaloglevel": "-1"}, "libcudaloglevel", 'must be between 0 and 4 (got "-1")'),
    ({"filterdevices": {"index": [-1]}}, "filterdevices.index[0]", "must be >= 0 (got -1)"),
    ({"filterdevices": {"uuid": [""]}}, "filterdevices.uuid[0]", 'must not be empty (got "")'),
]


@pytest.mark.parametrize(("fields", "key", "reason"), INVALID_MATCHING, ids=range(len(INVALID_MATCHING)))
def test_matching_entry_is_range_checked(write_file, fields, key, reason):
    path = write_nodes(write_file, {"name": NODE, **fields})
    with pytest.raises(ConfigError) as info:
        load_node_config(path, NODE)
    message = str(info.value)
    assert message.startswith(f"vgpu: invalid configuration in {path}: nodeconfig[0].{key}: "), message
    assert reason in message


def test_duplicate_node_names_are_an_error(write_file):
    path = write_nodes(write_file, {"name": "a"}, {"name": "b"}, {"name": "a"})
    with pytest.raises(ConfigError) as info:
        load_node_config(path, "unrelated-node")
    assert str(info.value) == (
        f'vgpu: invalid configuration in {path}: nodeconfig[2].name: duplicate node name (also nodeconfig[0]) (got "a")'
    )


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ('{"nodeconfig": [ {"name": "a",} ]}', "line 1, column 31", "not valid JSON: Expecting property name"),
        ('{"nodeconfig": []', "line 1, column 18", "not valid JSON"),
        ("nodeconfig:\n- name: a\n", "line 1, column 1", "not valid JSON"),
        (
            '{"nodeconfig": [{"name": "a", "devicecorescaling": NaN}]}',
            "(file)",
            "not valid JSON: NaN is not valid JSON",
        ),
        ("", "(root)", "file is empty; it must be a JSON object"),
        ("[]", "(root)", 'must be a JSON object with a "nodeconfig" array (got [])'),
        ('"x"', "(root)", 'must be a JSON object with a "nodeconfig" array (got "x")'),
        ('{"nodeconfig": {"name": "a"}}', "nodeconfig", 'must be an array (got {"name": "a"})'),
    ],
)
def test_malformed_json_and_bad_structure(write_file, text, key, reason):
    path = write_file(text, "config.json")
    with pytest.raises(ConfigError) as info:
        load_node_config(path, NODE)
    assert str(info.value).startswith(f"vgpu: invalid configuration in {path}: {key}: {reason}"), str(info.value)


# -- warnings ---------------------------------------------------------------------------------


def test_per_node_gpu_memory_factor_warns_with_reason(write_file):
    # docs/failures.md K-4
    path = write_nodes(write_file, {"name": NODE, "gpumemoryfactor": 4})
    config, warnings = load_node_config(path, NODE)
    assert config == NodeConfig(name=NODE, source=str(path))
    assert warnings == [
        f"{path}: nodeconfig[0].gpumemoryfactor: is not supported per node and is ignored: gpuMemoryFactor is "
        "global (device-config.yaml) so that a vgpu-memory request means the same on every node"
    ]


def test_hami_only_keys_warn(write_file):
    path = write_nodes(
        write_file,
        {
            "name": NODE,
            "preconfigureddevicememory": 100,
            "enablenumatopology": True,
            "enablegetpreferredallocation": False,
        },
    )
    _, warnings = load_node_config(path, NODE)
    assert len(warnings) == 3
    assert all("is a HAMi setting that the Volcano plugin does not support; ignored" in w for w in warnings)


def test_unknown_key_warns_with_suggestion(write_file):
    path = write_nodes(write_file, {"name": NODE, "devicesplitcont": 4, "weird": 1})
    config, warnings = load_node_config(path, NODE)
    assert config.device_split_count is None
    assert warnings[0].endswith(
        'nodeconfig[0].devicesplitcont: unknown key "devicesplitcont", ignored (did you mean "devicesplitcount"?)'
    )
    assert warnings[1].endswith('nodeconfig[0].weird: unknown key "weird", ignored')


def test_ignored_scaling_and_mig_strategy_warn(write_file):
    path = write_nodes(write_file, {"name": NODE, "devicememoryscaling": 1.8, "migstrategy": "mixed"})
    _, warnings = load_node_config(path, NODE)
    assert "nodeconfig[0].devicememoryscaling: 1.8 is accepted but ignored" in warnings[0]
    assert 'nodeconfig[0].migstrategy: "mixed" is ignored: static MIG strategies are not supported' in warnings[1]


def test_unknown_root_key_and_missing_nodeconfig_warn(write_file):
    path = write_file('{"nodeConfigs": []}', "config.json")
    config, warnings = load_node_config(path, NODE)
    assert config == NodeConfig(source=str(path))
    assert warnings == [
        f'{path}: nodeConfigs: unknown key "nodeConfigs", ignored (did you mean "nodeconfig"?)',
        f"{path}: nodeconfig: key is missing; no per-node settings apply",
    ]


def test_unnamed_entry_warns(write_file):
    path = write_nodes(write_file, {"devicesplitcount": 4})
    config, warnings = load_node_config(path, NODE)
    assert not config.matched
    assert warnings == [f"{path}: nodeconfig[0]: entry has no name; it applies to no node"]


def test_duplicate_json_keys_warn_and_last_wins(write_file):
    path = write_file(
        '{"nodeconfig": [{"name": "gpu-node-1", "devicesplitcount": 2, "devicesplitcount": 6}]}', "config.json"
    )
    config, warnings = load_node_config(path, NODE)
    assert config.device_split_count == 6
    assert warnings == [f'{path}: duplicate key "devicesplitcount"; the last value is used']
