"""The built-in `knownMigGeometries` (docs/mig.md §2.1) and its round trip through the parser."""

from __future__ import annotations

import yaml

from vgpu.config import DEFAULT_KNOWN_MIG_GEOMETRIES, EffectiveConfig, NodeConfig
from vgpu.config.device_config import default_device_config
from vgpu.config.mig_defaults import geometries_as_data
from vgpu.configfiles import load_device_config

# The upstream shipped ConfigMap section, written out independently of mig_defaults.py.
SHIPPED = """\
nvidia:
  knownMigGeometries:
  - models: ["A30"]
    allowedGeometries:
      - group: group1
        geometries:
        - {name: 1g.6gb, memory: 6144, count: 4}
      - group: group2
        geometries:
        - {name: 2g.12gb, memory: 12288, count: 2}
      - group: group3
        geometries:
        - {name: 4g.24gb, memory: 24576, count: 1}
  - models: ["A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"]
    allowedGeometries:
      - group: group1
        geometries:
        - {name: 1g.5gb, memory: 5120, count: 7}
      - group: group2
        geometries:
        - {name: 2g.10gb, memory: 10240, count: 3}
        - {name: 1g.5gb, memory: 5120, count: 1}
      - group: group3
        geometries:
        - {name: 3g.20gb, memory: 20480, count: 2}
      - group: group4
        geometries:
        - {name: 7g.40gb, memory: 40960, count: 1}
  - models: ["A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"]
    allowedGeometries:
      - group: group1
        geometries:
        - {name: 1g.10gb, memory: 9728, count: 7}
      - group: group2
        geometries:
        - {name: 2g.20gb, memory: 19968, count: 3}
        - {name: 1g.10gb, memory: 9728, count: 1}
      - group: group3
        geometries:
        - {name: 3g.40gb, memory: 40192, count: 2}
      - group: group4
        geometries:
        - {name: 7g.80gb, memory: 80896, count: 1}
"""


def test_defaults_equal_the_upstream_shipped_list(write_file):
    config, warnings = load_device_config(write_file(SHIPPED))
    assert warnings == []
    assert config.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES
    assert default_device_config().known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES


def test_a100_80gb_group2_positions():
    # docs/mig.md §4: group2 positions 0-2 = 2g.20gb, 3 = 1g.10gb; group1 has 7 positions.
    entry = EffectiveConfig(device=default_device_config(), node=NodeConfig()).mig_entry_for("NVIDIA A100-SXM4-80GB")
    assert entry is not None
    groups = {g.group: g for g in entry.groups}
    assert [t.name for t in groups["group2"].geometries] == ["2g.20gb", "1g.10gb"]
    assert [g.positions for g in entry.groups] == [7, 4, 2, 1]


def test_first_matching_entry_by_substring():
    config = EffectiveConfig(device=default_device_config(), node=NodeConfig())
    assert config.mig_entry_for("NVIDIA A30").models == ("A30",)
    assert config.mig_entry_for("NVIDIA A100-PCIE-40GB").groups[3].geometries[0].name == "7g.40gb"
    assert config.mig_entry_for("NVIDIA H100 80GB HBM3") is None
    assert config.mig_entry_for("NVIDIA A100-SXM4-80GB").groups[0].geometries[0].memory_mib == 9728


def test_geometries_as_data_round_trips_through_the_parser(write_file):
    text = yaml.safe_dump({"nvidia": {"knownMigGeometries": geometries_as_data()}})
    config, warnings = load_device_config(write_file(text))
    assert warnings == []
    assert config.known_mig_geometries == DEFAULT_KNOWN_MIG_GEOMETRIES
