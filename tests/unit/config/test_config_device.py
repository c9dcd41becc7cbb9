"""`device-config.yaml`: valid files, defaults, every validation rule, warnings (docs/configuration.md §2)."""

from __future__ import annotations

import socket
import textwrap

import pytest

from vgpu.config import DEFAULT_KNOWN_MIG_GEOMETRIES, ConfigError, DeviceConfig, MigGeometryEntry, MigGroup, MigTemplate
from vgpu.configfiles import load_device_config

FULL = """\
nvidia:
  resourceCountName: example.com/gpu-number
  resourceMemoryName: example.com/gpu-memory
  resourceCoreName: example.com/gpu-cores
  resourceMemoryPercentageName: example.com/gpu-memory-percentage
  resourcePriorityName: example.com/gpu-priority
  overwriteEnv: true
  defaultMemory: 1024
  defaultCores: 30
  defaultGPUNum: 2
  deviceSplitCount: 7
  deviceMemoryScaling: 1
  deviceCoreScaling: 2.5
  disableCoreLimit: false
  gpuMemoryFactor: 16
  knownMigGeometries:
  - models: ["H100 80GB HBM3"]
    allowedGeometries:
    - group: group1
      geometries:
      - {name: 1g.10gb, memory: 9984, count: 7}
    - group: group2
      geometries:
      - {name: 2g.20gb, memory: 20096, count: 3}
      - {name: 1g.10gb+me, memory: 9984, count: 1}
  passDeviceSpecs: false
  gpuCorePolicy: force
  libCudaLogLevel: "3"
  healthRecoverySeconds: 120
"""


def load(write_file, body: str) -> tuple[DeviceConfig, list[str]]:
    return load_device_config(write_file(body))


def nvidia(body: str) -> str:
    return "nvidia:\n" + textwrap.indent(textwrap.dedent(body), "  ")


# -- valid files -----------------------------------------------------------------------------


def test_full_file_sets_every_key(write_file):
    path = write_file(FULL)
    config, warnings = load_device_config(path)
    assert config.source == str(path)
    assert config.resource_count_name == "example.com/gpu-number"
    assert config.resource_memory_name == "example.com/gpu-memory"
    assert config.resource_core_name == "example.com/gpu-cores"
    assert config.resource_memory_percentage_name == "example.com/gpu-memory-percentage"
    assert config.resource_priority_name == "example.com/gpu-priority"
    assert config.overwrite_env is True
    assert (config.default_memory, config.default_cores, config.default_gpu_num) == (1024, 30, 2)
    assert config.device_split_count == 7
    assert config.device_memory_scaling == 1.0
    assert config.device_core_scaling == 2.5
    assert config.disable_core_limit is False
    assert config.gpu_memory_factor == 16
    assert config.known_mig_geometries == (
        MigGeometryEntry(
            models=("H100 80GB HBM3",),
            groups=(
                MigGroup("group1", (MigTemplate("1g.10gb", 9984, 7),)),
                MigGroup("group2", (MigTemplate("2g.20gb", 20096, 3), MigTemplate("1g.10gb+me", 9984, 1))),
            ),
        ),
    )
    assert config.pass_device_specs is False
    assert config.gpu_core_policy == "force"
    assert config.lib_cuda_log_level == 3  # numeric string accepted
    assert config.health_recovery_seconds == 120
    # Only the three non-default resource names warn.
    assert len(warnings) == 3
    assert all("Volcano master checks the default names" in w for w in warnings)
    assert any("nvidia.resourceCountName" in w and "example.com/gpu-number" in w for w in warnings)


def test_partial_file_keeps_defaults_for_omitted_keys(write_file):
    path = write_file(nvidia("deviceSplitCount: 4\n"))
    config, warnings = load_device_config(path)
    assert warnings == []
    assert config.device_split_count == 4
    assert config.source == str(path)
    defaults = DeviceConfig(known_mig_geometries=DEFAULT_KNOWN_MIG_GEOMETRIES)
    for name in DeviceConfig.__dataclass_fields__:
        if name not in ("device_split_count", "source"):
            assert getattr(config, name) == getattr(defaults, name), name
    # Omitted knownMigGeometries = the upstream shipped list, not empty.
    assert config.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES


def test_empty_nvidia_section_means_all_defaults_with_a_warning(write_file):
    config, warnings = load(write_file, "nvidia:\n")
    assert config.device_split_count == 10
    assert config.resource_count_name == "volcano.sh/vgpu-number"
    assert warnings == [f"{config.source}: nvidia: section is empty; using built-in defaults"]
    config, warnings = load(write_file, "nvidia: {}\n")
    assert warnings == [] and config.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES


def test_explicit_empty_geometry_list_is_kept(write_file):
    config, warnings = load(write_file, nvidia("knownMigGeometries: []\n"))
    assert config.known_mig_geometries == ()
    assert warnings == []


def test_key_with_empty_value_takes_the_default_with_a_warning(write_file):
    config, warnings = load(write_file, nvidia("deviceSplitCount:\nresourceCountName:\n"))
    assert config.device_split_count == 10
    assert config.resource_count_name == "volcano.sh/vgpu-number"
    assert [w.split(": ", 1)[1] for w in warnings] == [
        "nvidia.deviceSplitCount: empty value; using the built-in default",
        "nvidia.resourceCountName: empty value; using the built-in default",
    ]


def test_other_root_keys_are_ignored(write_file):
    config, warnings = load(write_file, "cambricon:\n  resourceCountName: x\n" + nvidia("deviceSplitCount: 3\n"))
    assert config.device_split_count == 3
    assert warnings == []


def test_yaml_scalar_forms(write_file):
    # YAML 1.1 booleans (as the Go yaml.v2 readers see them), exponent floats, plain ints.
    config, warnings = load(
        write_file,
        nvidia("overwriteEnv: yes\npassDeviceSpecs: False\ndeviceCoreScaling: 5e-1\nlibCudaLogLevel: 0\n"),
    )
    assert config.overwrite_env is True and config.pass_device_specs is False
    assert config.device_core_scaling == 0.5
    assert config.lib_cuda_log_level == 0
    assert warnings == []


def test_percentage_and_priority_names_may_be_empty(write_file):
    config, warnings = load(write_file, nvidia('resourceMemoryPercentageName: ""\nresourcePriorityName: ""\n'))
    assert config.resource_memory_percentage_name == ""
    assert config.resource_priority_name == ""
    assert warnings == []


def test_utf8_bom_is_tolerated(write_file):
    config, _ = load_device_config(write_file(b"\xef\xbb\xbfnvidia:\n  deviceSplitCount: 5\n"))
    assert config.device_split_count == 5


# -- invalid values: one case per rule of docs/configuration.md §2.2 and docs/mig.md §2 -------------------------

INVALID = [
    # resource names
    ('resourceCountName: ""', "nvidia.resourceCountName", 'must not be empty (got "")'),
    ("resourceCountName: vgpu-number", "nvidia.resourceCountName", "must have the form <domain>/<name>"),
    ("resourceCountName: a.io/b/c", "nvidia.resourceCountName", "must have the form <domain>/<name>"),
    ("resourceCountName: /vgpu", "nvidia.resourceCountName", "domain must not be empty"),
    ("resourceCountName: Volcano.sh/vgpu", "nvidia.resourceCountName", "domain must be a lowercase DNS subdomain"),
    ("resourceMemoryName: kubernetes.io/vgpu", "nvidia.resourceMemoryName", "domain must not be kubernetes.io"),
    ("resourceMemoryName: gpu.kubernetes.io/vgpu", "nvidia.resourceMemoryName", "domain must not be kubernetes.io"),
    ("resourceCoreName: requests.volcano.sh/vgpu", "nvidia.resourceCoreName", 'domain must not start with "requests."'),
    ("resourceCoreName: volcano.sh/", "nvidia.resourceCoreName", "name after the / must not be empty"),
    ("resourceCoreName: volcano.sh/-cores", "nvidia.resourceCoreName", "name after the / must consist of"),
    ("resourceCoreName: volcano.sh/cores_", "nvidia.resourceCoreName", "name after the / must consist of"),
    ("resourceCoreName: volcano.sh/" + "c" * 64, "nvidia.resourceCoreName", "at most 63 characters"),
    ("resourceCountName: 5", "nvidia.resourceCountName", "must be a string (quote it) (got 5)"),
    ("resourceMemoryPercentageName: bad", "nvidia.resourceMemoryPercentageName", "must have the form"),
    ("resourcePriorityName: kubernetes.io/p", "nvidia.resourcePriorityName", "domain must not be kubernetes.io"),
    # distinct names
    (
        "resourceMemoryName: volcano.sh/vgpu-number",
        "nvidia.resourceMemoryName",
        'must differ from nvidia.resourceCountName (got "volcano.sh/vgpu-number")',
    ),
    (
        "resourceCountName: volcano.sh/vgpu-cores",
        "nvidia.resourceCountName",
        "must differ from nvidia.resourceCoreName",
    ),
    (
        "resourceMemoryPercentageName: volcano.sh/vgpu-memory",
        "nvidia.resourceMemoryPercentageName",
        "must differ from nvidia.resourceMemoryName",
    ),
    # integers
    ("deviceSplitCount: 0", "nvidia.deviceSplitCount", "must be >= 1 (got 0)"),
    ("deviceSplitCount: -3", "nvidia.deviceSplitCount", "must be >= 1 (got -3)"),
    ("deviceSplitCount: true", "nvidia.deviceSplitCount", "must be an integer (got true)"),
    ('deviceSplitCount: "10"', "nvidia.deviceSplitCount", 'must be an integer (got "10")'),
    ("deviceSplitCount: 2.5", "nvidia.deviceSplitCount", "must be an integer (got 2.5)"),
    ("deviceSplitCount: [1]", "nvidia.deviceSplitCount", "must be an integer (got [1])"),
    ("gpuMemoryFactor: 0", "nvidia.gpuMemoryFactor", "must be >= 1 (got 0)"),
    ("gpuMemoryFactor: false", "nvidia.gpuMemoryFactor", "must be an integer (got false)"),
    ("healthRecoverySeconds: -1", "nvidia.healthRecoverySeconds", "must be >= 0 (got -1)"),
    ("healthRecoverySeconds: 1.5", "nvidia.healthRecoverySeconds", "must be an integer (got 1.5)"),
    ('defaultMemory: "1"', "nvidia.defaultMemory", "must be an integer"),
    ("defaultCores: true", "nvidia.defaultCores", "must be an integer (got true)"),
    ("defaultGPUNum: 1.0", "nvidia.defaultGPUNum", "must be an integer"),
    # numbers
    ("deviceCoreScaling: 0", "nvidia.deviceCoreScaling", "must be > 0 (got 0)"),
    ("deviceCoreScaling: -1.5", "nvidia.deviceCoreScaling", "must be > 0 (got -1.5)"),
    ("deviceCoreScaling: 0.005", "nvidia.deviceCoreScaling", "int(100 × value) >= 1) (got 0.005)"),
    ("deviceCoreScaling: .nan", "nvidia.deviceCoreScaling", "must be a finite number"),
    ("deviceCoreScaling: .inf", "nvidia.deviceCoreScaling", "must be a finite number"),
    ('deviceCoreScaling: "1"', "nvidia.deviceCoreScaling", 'must be a number (got "1")'),
    ("deviceCoreScaling: true", "nvidia.deviceCoreScaling", "must be a number (got true)"),
    ("deviceMemoryScaling: 0", "nvidia.deviceMemoryScaling", "must be > 0 (got 0)"),
    ("deviceMemoryScaling: yes", "nvidia.deviceMemoryScaling", "must be a number (got true)"),
    # enums and log level
    ("gpuCorePolicy: Force", "nvidia.gpuCorePolicy", 'must be one of "default", "force", "disable" (got "Force")'),
    ("gpuCorePolicy: 1", "nvidia.gpuCorePolicy", "must be a string"),
    ("libCudaLogLevel: 5", "nvidia.libCudaLogLevel", "must be between 0 and 4 (got 5)"),
    ("libCudaLogLevel: -1", "nvidia.libCudaLogLevel", "must be between 0 and 4 (got -1)"),
    ('libCudaLogLevel: "5"', "nvidia.libCudaLogLevel", 'must be between 0 and 4 (got "5")'),
    ("libCudaLogLevel: two", "nvidia.libCudaLogLevel", 'must be an integer or a numeric string (got "two")'),
    ("libCudaLogLevel: 2.0", "nvidia.libCudaLogLevel", "must be an integer or a numeric string (got 2.0)"),
    ("libCudaLogLevel: true", "nvidia.libCudaLogLevel", "must be an integer or a numeric string (got true)"),
    # booleans: YAML booleans only
    ('overwriteEnv: "true"', "nvidia.overwriteEnv", 'must be a YAML boolean (true or false) (got "true")'),
    ("overwriteEnv: 1", "nvidia.overwriteEnv", "must be a YAML boolean (true or false) (got 1)"),
    ('passDeviceSpecs: "yes"', "nvidia.passDeviceSpecs", "must be a YAML boolean"),
    ("disableCoreLimit: 0", "nvidia.disableCoreLimit", "must be a YAML boolean (true or false) (got 0)"),
]


@pytest.mark.parametrize(("body", "key", "reason"), INVALID, ids=[case[0] for case in INVALID])
def test_invalid_value_is_rejected_with_key_and_reason(write_file, body, key, reason):
    path = write_file(nvidia(body + "\n"))
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    message = str(info.value)
    assert message.startswith(f"vgpu: invalid configuration in {path}: {key}: "), message
    assert reason in message
    assert info.value.path == str(path) and info.value.key == key


GEOMETRY = """\
knownMigGeometries:
- models: [A30]
  allowedGeometries:
  - group: group1
    geometries:
    - {name: 1g.6gb, memory: 6144, count: 4}
"""

INVALID_GEOMETRIES = [
    ("knownMigGeometries: {}", "nvidia.knownMigGeometries", "must be a list (got {})"),
    ("knownMigGeometries: A30", "nvidia.knownMigGeometries", 'must be a list (got "A30")'),
    ("knownMigGeometries: [A30]", "nvidia.knownMigGeometries[0]", 'must be a mapping (got "A30")'),
    (
        "knownMigGeometries: [{allowedGeometries: []}]",
        "nvidia.knownMigGeometries[0].models",
        "required key is missing",
    ),
    (GEOMETRY.replace("[A30]", "[]"), "nvidia.knownMigGeometries[0].models", "must not be empty (got [])"),
    (GEOMETRY.replace("[A30]", "A30"), "nvidia.knownMigGeometries[0].models", 'must be a list (got "A30")'),
    (GEOMETRY.replace("[A30]", '[A30, ""]'), "nvidia.knownMigGeometries[0].models[1]", 'must not be empty (got "")'),
    (
        GEOMETRY.replace("[A30]", "[1080]"),
        "nvidia.knownMigGeometries[0].models[0]",
        "must be a string (quote it) (got 1080)",
    ),
    (
        "knownMigGeometries: [{models: [A30]}]",
        "nvidia.knownMigGeometries[0].allowedGeometries",
        "required key is missing",
    ),
    (
        "knownMigGeometries: [{models: [A30], allowedGeometries: []}]",
        "nvidia.knownMigGeometries[0].allowedGeometries",
        "must not be empty",
    ),
    (
        "knownMigGeometries: [{models: [A30], allowedGeometries: [[{name: 1g.6gb, memory: 6144, count: 4}]]}]",
        "nvidia.knownMigGeometries[0].allowedGeometries[0]",
        "the older bare-list format is not supported",
    ),
    (
        GEOMETRY.replace("group: group1", 'group: ""'),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].group",
        'must not be empty (got "")',
    ),
    (
        GEOMETRY.replace("group: group1", "group: 7"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].group",
        "must be a string",
    ),
    (
        GEOMETRY.replace("group: group1", "groupname: g"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].group",
        "required key is missing",
    ),
    (
        GEOMETRY.replace("    geometries:\n    - {name: 1g.6gb, memory: 6144, count: 4}\n", "    geometries: []\n"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries",
        "must not be empty",
    ),
    (
        GEOMETRY.replace("1g.6gb", "1g.6GB"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].name",
        'must be a MIG profile name like 1g.10gb or 1g.10gb+me (got "1g.6GB")',
    ),
    (
        GEOMETRY.replace("1g.6gb", "1g6gb"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].name",
        "must be a MIG profile name",
    ),
    (
        GEOMETRY.replace("1g.6gb", "1g.6gb+mx"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].name",
        "must be a MIG profile name",
    ),
    (
        GEOMETRY.replace("name: 1g.6gb, ", ""),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].name",
        "required key is missing",
    ),
    (
        GEOMETRY.replace("memory: 6144", "memory: 0"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].memory",
        "must be >= 1 (got 0)",
    ),
    (
        GEOMETRY.replace("memory: 6144", 'memory: "6144"'),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].memory",
        'must be an integer (got "6144")',
    ),
    (
        GEOMETRY.replace("memory: 6144, ", ""),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].memory",
        "required key is missing",
    ),
    (
        GEOMETRY.replace("count: 4", "count: 0"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].count",
        "must be >= 1 (got 0)",
    ),
    (
        GEOMETRY.replace("count: 4", "count: true"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0].count",
        "must be an integer (got true)",
    ),
    (
        GEOMETRY.replace("- {name: 1g.6gb, memory: 6144, count: 4}", "- 1g.6gb"),
        "nvidia.knownMigGeometries[0].allowedGeometries[0].geometries[0]",
        'must be a mapping (got "1g.6gb")',
    ),
    (
        GEOMETRY + "  - group: group1\n    geometries: [{name: 4g.24gb, memory: 24576, count: 1}]\n",
        "nvidia.knownMigGeometries[0].allowedGeometries[1].group",
        'duplicate group name (also nvidia.knownMigGeometries[0].allowedGeometries[0]) (got "group1")',
    ),
]


@pytest.mark.parametrize(("body", "key", "reason"), INVALID_GEOMETRIES, ids=range(len(INVALID_GEOMETRIES)))
def test_invalid_geometry_is_rejected_with_key_and_reason(write_file, body, key, reason):
    path = write_file(nvidia(body))
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    message = str(info.value)
    assert message.startswith(f"vgpu: invalid configuration in {path}: {key}: "), message
    assert reason in message


def test_spec_example_error_message_is_exact(write_file):
    body = GEOMETRY + textwrap.indent(GEOMETRY.split("\n", 1)[1].replace("group1", "group-1"), "")
    path = write_file(nvidia(body))
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    assert str(info.value) == (
        f"vgpu: invalid configuration in {path}: "
        'nvidia.knownMigGeometries[1].allowedGeometries[0].group: must not contain "-" (got "group-1")'
    )
    assert info.value.value == "group-1"
    assert info.value.reason == 'must not contain "-"'


def test_exact_message_for_a_boolean_split_count(write_file):
    path = write_file(nvidia("deviceSplitCount: true\n"))
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    assert (
        str(info.value)
        == f"vgpu: invalid configuration in {path}: nvidia.deviceSplitCount: must be an integer (got true)"
    )


def test_exact_message_for_a_missing_nvidia_root(write_file):
    path = write_file("Nvidia:\n  deviceSplitCount: 3\n")
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    assert str(info.value) == (
        f"vgpu: invalid configuration in {path}: nvidia: required root key is missing "
        '(found "Nvidia"; keys are case-sensitive)'
    )


# -- structurally invalid files ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "reason"),
    [
        ("", "(root)", "file is empty; it must be a mapping with an nvidia: key"),
        ("# only a comment\n", "(root)", "file is empty"),
        ("- nvidia\n", "(root)", 'must be a mapping with an nvidia: key (got ["nvidia"])'),
        ("just text\n", "(root)", 'must be a mapping with an nvidia: key (got "just text")'),
        ("volcano:\n  x: 1\n", "nvidia", "required root key is missing"),
        ("nvidia: [1, 2]\n", "nvidia", "must be a mapping (got [1, 2])"),
        ("nvidia: 10\n", "nvidia", "must be a mapping (got 10)"),
    ],
)
def test_bad_root_is_an_error(write_file, text, key, reason):
    path = write_file(text)
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    assert str(info.value).startswith(f"vgpu: invalid configuration in {path}: {key}: {reason}")


def test_malformed_yaml_names_line_and_column(write_file):
    path = write_file("nvidia:\n  deviceSplitCount: 10\n   gpuMemoryFactor: [1\n")
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    message = str(info.value)
    assert message.startswith(f"vgpu: invalid configuration in {path}: line 3, column ")
    assert "not valid YAML" in message


def test_unclosed_flow_sequence_is_malformed(write_file):
    path = write_file("nvidia:\n  knownMigGeometries: [\n")
    with pytest.raises(ConfigError, match=r"line \d+, column \d+: not valid YAML"):
        load_device_config(path)


def test_several_documents_are_rejected(write_file):
    path = write_file("nvidia: {}\n---\nnvidia: {}\n")
    with pytest.raises(ConfigError, match="not valid YAML: expected a single document"):
        load_device_config(path)


def test_invalid_utf8_is_an_error(write_file):
    path = write_file(b"nvidia:\n  resourceCountName: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_device_config(path)
    assert str(info.value) == f"vgpu: invalid configuration in {path}: (file): is not valid UTF-8 (byte 29)"


def test_a_directory_is_an_error_not_defaults(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_device_config(tmp_path)
    assert str(info.value) == f"vgpu: invalid configuration in {tmp_path}: (file): is a directory, not a file"


def test_an_unreadable_file_is_an_error_not_defaults(tmp_path):
    # open() on a UNIX socket fails with ENXIO, also for root (chmod 000 would not stop root).
    path = tmp_path / "device-config.yaml"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        with pytest.raises(ConfigError) as info:
            load_device_config(path)
    finally:
        server.close()
    assert str(info.value).startswith(f"vgpu: invalid configuration in {path}: (file): cannot be read: ")


# -- warnings -------------------------------------------------------------------------------


def test_unknown_key_differing_in_case_warns_and_is_not_applied(write_file):
    path = write_file(nvidia("DeviceSplitCount: 3\n"))
    config, warnings = load_device_config(path)
    assert config.device_split_count == 10
    assert warnings == [
        f'{path}: nvidia.DeviceSplitCount: unknown key "DeviceSplitCount", ignored (did you mean "deviceSplitCount"?)'
    ]


def test_unknown_key_within_edit_distance_two_gets_a_suggestion(write_file):
    _, warnings = load(write_file, nvidia("gpuMemoryFacter: 2\nresourceCountNam: a.io/b\n"))
    assert 'unknown key "gpuMemoryFacter", ignored (did you mean "gpuMemoryFactor"?)' in warnings[0]
    assert 'did you mean "resourceCountName"?' in warnings[1]


def test_unknown_key_far_from_everything_has_no_suggestion(write_file):
    _, warnings = load(write_file, nvidia("schedulerPolicy: binpack\n"))
    assert len(warnings) == 1
    assert warnings[0].endswith('nvidia.schedulerPolicy: unknown key "schedulerPolicy", ignored')


def test_disablecorelimit_lowercase_suggests_the_key_and_gpu_core_policy(write_file):
    # docs/failures.md C-3
    config, warnings = load(write_file, nvidia("disablecorelimit: true\n"))
    assert config.disable_core_limit is False
    assert len(warnings) == 1
    assert 'did you mean "disableCoreLimit"?' in warnings[0]
    assert "gpuCorePolicy" in warnings[0]


def test_migstrategy_warns_that_static_mig_is_unsupported(write_file):
    _, warnings = load(write_file, nvidia("migstrategy: mixed\n"))
    assert len(warnings) == 1 and "static MIG strategies are not supported" in warnings[0]


def test_device_memory_scaling_other_than_one_warns_and_is_ignored(write_file):
    # docs/failures.md C-1
    config, warnings = load(write_file, nvidia("deviceMemoryScaling: 2\n"))
    assert config.device_memory_scaling == 2.0
    assert len(warnings) == 1
    assert "nvidia.deviceMemoryScaling: 2 is accepted but ignored" in warnings[0]
    assert "oversubscription is not supported" in warnings[0]


def test_ignored_booleans_warn_when_set(write_file):
    _, warnings = load(write_file, nvidia("disableCoreLimit: true\npassDeviceSpecs: true\n"))
    assert any("nvidia.disableCoreLimit: is accepted but has no effect; use gpuCorePolicy" in w for w in warnings)
    assert any("nvidia.passDeviceSpecs: is accepted but ignored" in w for w in warnings)


def test_each_non_default_resource_name_warns(write_file):
    _, warnings = load(write_file, nvidia("resourceCoreName: example.com/cores\n"))
    assert len(warnings) == 1
    assert 'nvidia.resourceCoreName: "example.com/cores" is not the default "volcano.sh/vgpu-cores"' in warnings[0]


def test_unknown_keys_inside_geometries_warn(write_file):
    body = GEOMETRY.replace("- models: [A30]", "- models: [A30]\n  modelz: [A40]").replace(
        "count: 4}", "count: 4, cout: 2}"
    )
    _, warnings = load(write_file, nvidia(body))
    assert len(warnings) == 2
    assert 'nvidia.knownMigGeometries[0].modelz: unknown key "modelz", ignored (did you mean "models"?)' in warnings[0]
    assert 'geometries[0].cout: unknown key "cout", ignored (did you mean "count"?)' in warnings[1]


def test_model_in_two_entries_warns_first_wins(write_file):
    _, warnings = load(write_file, nvidia(GEOMETRY + GEOMETRY.split("\n", 1)[1]))
    assert len(warnings) == 1
    assert 'nvidia.knownMigGeometries[1].models: model "A30" is also in nvidia.knownMigGeometries[0]' in warnings[0]


def test_duplicate_yaml_key_warns_and_the_last_value_wins(write_file):
    path = write_file(nvidia("deviceSplitCount: 3\ndeviceSplitCount: 5\n"))
    config, warnings = load_device_config(path)
    assert config.device_split_count == 5
    assert warnings == [f'{path}: line 3: duplicate key "deviceSplitCount" (first on line 2); the last value is used']


def test_deeply_nested_yaml_is_an_error_not_a_crash(write_file):
    path = write_file("nvidia:\n  x: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match=r": \(file\): not valid YAML: nested too deeply$"):
        load_device_config(path)


def test_python_tags_are_rejected(write_file):
    path = write_file("nvidia:\n  x: !!python/object:os.system {}\n")
    with pytest.raises(ConfigError, match=r"line 2, column 6: not valid YAML: could not determine a constructor"):
        load_device_config(path)


def test_non_string_key_is_an_unknown_key(write_file):
    _, warnings = load(write_file, nvidia("1: 2\n"))
    assert len(warnings) == 1 and warnings[0].endswith('nvidia.1: unknown key "1", ignored')
