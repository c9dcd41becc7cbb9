"""`vgpu demo` options: node sets from the defaults, --gpus/--mode and --nodes FILE; clear errors."""

from __future__ import annotations

import json
import pathlib

import pytest

from vgpu.sim.demo.options import DemoConfigError, build_options, gpu_uuid, parse_gpus


def test_default_is_two_nodes_one_per_mode():
    o = build_options()
    assert [(n.name, n.mode, [g.name for g in n.gpus]) for n in o.nodes] == [
        ("gpu-node-1", "hami-core", ["NVIDIA A100-SXM4-80GB"] * 2),
        ("gpu-node-2", "mig", ["NVIDIA A30"]),
    ]
    assert o.volcano_version == "master" and o.policy == "binpack" and o.scheduler_policy == "binpack"
    assert o.mig_supported and o.notes == ()
    uuids = [g.uuid for n in o.nodes for g in n.gpus]
    assert len(set(uuids)) == 3 and all(u.startswith("GPU-") and len(u) == 40 for u in uuids)
    assert uuids == [g.uuid for n in build_options().nodes for g in n.gpus]  # stable across runs


def test_gpus_and_mode_give_one_node():
    o = build_options(gpus="A100-40GB:2,a10", mode="hami-core", policy="none")
    (node,) = o.nodes
    assert [g.name for g in node.gpus] == ["NVIDIA A100-SXM4-40GB"] * 2 + ["NVIDIA A10"]
    assert [g.memory_mib for g in node.gpus] == [40960, 40960, 23028]
    assert o.scheduler_policy == ""
    (mig,) = build_options(mode="mig").nodes
    assert mig.mig and [g.name for g in mig.gpus] == ["NVIDIA A30"]


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"gpus": "B200:1"}, "unknown GPU model 'B200'"),
        ({"gpus": "A30:0"}, "count of 'A30' must be a positive integer"),
        ({"gpus": "A30,,A10"}, "empty entry"),
        ({"gpus": "T4:1", "mode": "mig"}, "has no built-in knownMigGeometries entry"),
        ({"policy": "random"}, "--policy: must be one of binpack, spread, none"),
        ({"volcano_version": "v1.8"}, "--volcano-version: Volcano v1.8 predates"),
        ({"volcano_version": "banana"}, "--volcano-version: unknown Volcano version"),
        ({"duration": 0}, "--duration: must be a positive number"),
        ({"nodes_file": "x.json", "gpus": "A30"}, "--nodes cannot be combined"),
    ],
)
def test_bad_options_name_the_option(kwargs, message):
    with pytest.raises(DemoConfigError, match=None) as err:
        build_options(**kwargs)
    assert message in str(err.value)


def test_old_volcano_leaves_mig_nodes_out_with_a_note():
    o = build_options(volcano_version="1.11.2")
    assert o.volcano_version == "v1.11" and not o.mig_supported
    assert [n.name for n in o.nodes] == ["gpu-node-1"]
    assert "needs >= v1.12" in o.notes[0]
    with pytest.raises(DemoConfigError, match="every node is in mode mig"):
        build_options(volcano_version="v1.9", mode="mig")


def test_nodes_file(tmp_path: pathlib.Path):
    f = tmp_path / "nodes.json"
    f.write_text(
        json.dumps(
            {
                "nodes": [
                    {"name": "a", "mode": "mig", "gpus": [{"model": "A100-80GB", "count": 2}]},
                    {"name": "b", "gpus": [{"name": "NVIDIA L40S", "memory_mib": 46068, "count": 3}]},
                ]
            }
        )
    )
    o = build_options(nodes_file=str(f))
    assert [(n.name, n.mode, len(n.gpus)) for n in o.nodes] == [("a", "mig", 2), ("b", "hami-core", 3)]
    assert o.nodes[1].gpus[2].uuid == gpu_uuid("b", 2)


@pytest.mark.parametrize(
    "doc, message",
    [
        ("{", "not valid JSON"),
        ({"nodes": []}, "at least one node"),
        ({"nodes": [{"name": "A_B", "gpus": [{"model": "A30"}]}]}, "nodes[0].name: 'A_B' is not a DNS-1123 node name"),
        ({"nodes": [{"gpus": [{"model": "A30", "colour": 1}]}]}, "nodes[0].gpus[0]: unknown key(s) colour"),
        ({"nodes": [{"gpus": [{"name": "X"}]}]}, "nodes[0].gpus[0].memory_mib: must be an integer >= 1"),
        ({"nodes": [{"gpus": [{"model": "A30", "name": "X", "memory_mib": 1}]}]}, "either model or name"),
        ({"nodes": [{"mode": "mps", "gpus": [{"model": "A30"}]}]}, "nodes[0].mode: must be one of hami-core, mig"),
        (
            {"nodes": [{"name": "a", "gpus": [{"model": "A30"}]}, {"name": "a", "gpus": [{"model": "A30"}]}]},
            "node name 'a' is used twice",
        ),
        ({"nodes": [{"gpus": [{"model": "A30", "count": 17}]}]}, "at most 16 GPUs per node"),
    ],
)
def test_nodes_file_errors_name_file_and_key(tmp_path: pathlib.Path, doc, message):
    f = tmp_path / "nodes.json"
    f.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    with pytest.raises(DemoConfigError) as err:
        build_options(nodes_file=str(f))
    assert message in str(err.value) and str(f) in str(err.value)


def test_missing_nodes_file():
    with pytest.raises(DemoConfigError, match="No such file"):
        build_options(nodes_file="/nonexistent/nodes.json")


def test_parse_gpus_aliases():
    assert [m.name for m in parse_gpus("A100-SXM4-80GB:1,h100")] == ["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"]
