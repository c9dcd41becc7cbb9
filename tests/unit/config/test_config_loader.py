"""`load_config`: defaults when files are absent, precedence (docs/configuration.md §4), logging, mounts."""

from __future__ import annotations

import json
import logging
import os

import pytest

from vgpu.config import DEFAULT_KNOWN_MIG_GEOMETRIES, ConfigError, EffectiveConfig
from vgpu.configfiles import load_config, load_device_config, load_node_config

NODE = "gpu-node-1"


def test_no_files_gives_the_built_in_defaults(tmp_path):
    # docs/decisions.md decision 2 / docs/failures.md C-2: never empty names or split count 0.
    config = load_config(tmp_path / "missing.yaml", tmp_path / "missing.json", NODE)
    assert isinstance(config, EffectiveConfig)
    device = config.device
    assert (device.resource_count_name, device.resource_memory_name, device.resource_core_name) == (
        "volcano.sh/vgpu-number",
        "volcano.sh/vgpu-memory",
        "volcano.sh/vgpu-cores",
    )
    assert device.resource_memory_percentage_name == "volcano.sh/vgpu-memory-percentage"
    assert config.split_count == 10
    assert config.gpu_memory_factor == 1
    assert config.core_scaling == 1.0 and config.cores_per_gpu == 100
    assert config.operating_mode == "hami-core"
    assert config.lib_cuda_log_level is None
    assert device.gpu_core_policy == "default" and device.health_recovery_seconds == 0
    assert device.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES
    assert config.warnings == ()
    assert not config.is_filtered(0, "GPU-x")


def test_none_and_empty_paths_mean_absent():
    config = load_config(None, "", NODE)
    assert config.split_count == 10 and config.warnings == ()
    device, warnings = load_device_config("")
    assert device.device_split_count == 10 and warnings == []
    node, warnings = load_node_config(None, NODE)
    assert not node.matched and warnings == []


def test_missing_file_is_logged_at_info(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="vgpu.config")
    load_config(tmp_path / "d.yaml", tmp_path / "c.json", NODE)
    assert any(
        "not found; using built-in defaults" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_precedence_default_then_device_config_then_matching_node_entry(write_file):
    device = write_file(
        """\
        nvidia:
          deviceSplitCount: 4
          deviceCoreScaling: 2
          libCudaLogLevel: 1
          gpuMemoryFactor: 8
        """
    )
    nodes = write_file(
        json.dumps(
            {
                "nodeconfig": [
                    {"name": "other", "devicesplitcount": 2, "libcudaloglevel": 4},
                    {
                        "name": NODE,
                        "devicesplitcount": 7,
                        "devicecorescaling": 0.5,
                        "libcudaloglevel": 3,
                        "operatingmode": "mig",
                        "filterdevices": {"uuid": ["GPU-b"], "index": [2]},
                    },
                ]
            }
        ),
        "config.json",
    )
    config = load_config(device, nodes, NODE)
    assert config.split_count == 7
    assert config.core_scaling == 0.5 and config.cores_per_gpu == 50
    assert config.lib_cuda_log_level == 3
    assert config.operating_mode == "mig"
    assert config.gpu_memory_factor == 8  # never per node
    assert config.is_filtered(2, "GPU-a") and config.is_filtered(0, "GPU-b")
    assert not config.is_filtered(0, "GPU-a")
    assert config.device.device_split_count == 4  # the device layer is kept as read


def test_device_config_applies_when_no_entry_matches(write_file):
    device = write_file("nvidia:\n  deviceSplitCount: 4\n  deviceCoreScaling: 2\n  libCudaLogLevel: 1\n")
    nodes = write_file(
        json.dumps({"nodeconfig": [{"name": "other", "devicesplitcount": 9, "operatingmode": "mig"}]}), "config.json"
    )
    config = load_config(device, nodes, NODE)
    assert (config.split_count, config.cores_per_gpu, config.lib_cuda_log_level) == (4, 200, 1)
    assert config.operating_mode == "hami-core"


def test_node_zero_values_keep_the_device_config(write_file):
    device = write_file("nvidia:\n  deviceSplitCount: 4\n")
    nodes = write_file(
        json.dumps({"nodeconfig": [{"name": NODE, "devicesplitcount": 0, "libcudaloglevel": 0}]}), "config.json"
    )
    config = load_config(device, nodes, NODE)
    assert config.split_count == 4
    assert config.lib_cuda_log_level == 0  # present = override, even 0


def test_warnings_are_collected_and_logged(write_file, caplog):
    device = write_file("nvidia:\n  deviceMemoryScaling: 2\n  resourceCountName: example.com/n\n")
    nodes = write_file(json.dumps({"nodeconfig": [{"name": NODE, "gpumemoryfactor": 2}]}), "config.json")
    caplog.set_level(logging.WARNING, logger="vgpu.config")
    config = load_config(device, nodes, NODE)
    assert len(config.warnings) == 3
    assert f"{device}: nvidia.resourceCountName" in config.warnings[0]
    assert f"{device}: nvidia.deviceMemoryScaling" in config.warnings[1]
    assert f"{nodes}: nodeconfig[0].gpumemoryfactor" in config.warnings[2]
    logged = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage() for r in logged] == [f"configuration: {w}" for w in config.warnings]
    assert all(getattr(r, "config_warning", False) for r in logged)


def test_mig_mode_with_small_split_count_warns(write_file):
    device = write_file("nvidia:\n  deviceSplitCount: 4\n")
    nodes = write_file(json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig"}]}), "config.json")
    config = load_config(device, nodes, NODE)
    assert len(config.warnings) == 1
    assert "split count 4, smaller than the largest MIG group (7 instances)" in config.warnings[0]
    nodes = write_file(
        json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig", "devicesplitcount": 7}]}), "config.json"
    )
    assert load_config(device, nodes, NODE).warnings == ()


def test_mig_mode_without_geometries_warns(write_file):
    device = write_file("nvidia:\n  knownMigGeometries: []\n")
    nodes = write_file(json.dumps({"nodeconfig": [{"name": NODE, "operatingmode": "mig"}]}), "config.json")
    config = load_config(device, nodes, NODE)
    assert len(config.warnings) == 1 and "empty knownMigGeometries list" in config.warnings[0]


def test_configmap_volume_layout_with_symlinks(tmp_path):
    # A ConfigMap volume: key -> ..data/key, ..data -> ..<timestamp>/
    real = tmp_path / "..2024_01_01"
    real.mkdir()
    (real / "device-config.yaml").write_text("nvidia:\n  deviceSplitCount: 6\n")
    os.symlink(real.name, tmp_path / "..data")
    os.symlink("..data/device-config.yaml", tmp_path / "device-config.yaml")
    os.symlink("..data/config.json", tmp_path / "config.json")  # dangling: key not in the ConfigMap
    config = load_config(tmp_path / "device-config.yaml", tmp_path / "config.json", NODE)
    assert config.split_count == 6
    assert not config.node.matched


def test_errors_propagate_from_load_config(write_file):
    device = write_file("nvidia:\n  deviceSplitCount: 0\n")
    with pytest.raises(ConfigError, match=r"nvidia\.deviceSplitCount: must be >= 1 \(got 0\)"):
        load_config(device, None, NODE)
    nodes = write_file("{", "config.json")
    with pytest.raises(ConfigError, match=r"config\.json: line 1, column 2: not valid JSON"):
        load_config(None, nodes, NODE)


def test_config_error_renders_values_as_written():
    assert str(ConfigError("/f", "k", "bad", None)) == "vgpu: invalid configuration in /f: k: bad (got null)"
    assert (
        str(ConfigError("/f", "k", "bad", {"a": [True]}))
        == 'vgpu: invalid configuration in /f: k: bad (got {"a": [true]})'
    )
    assert (
        str(ConfigError("/f", "k", "bad", 'say "hi"'))
        == 'vgpu: invalid configuration in /f: k: bad (got "say \\"hi\\"")'
    )
    long = str(ConfigError("/f", "k", "bad", "x" * 500))
    assert len(long) < 200 and long.endswith("…)")
    assert str(ConfigError("/f", "k", "missing", show_value=False)) == "vgpu: invalid configuration in /f: k: missing"
