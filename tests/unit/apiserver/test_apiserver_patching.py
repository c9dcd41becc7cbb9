"""The three PATCH flavours: RFC 7386 merge, RFC 6902 JSON patch and strategic merge."""

from __future__ import annotations

import copy

import pytest

from vgpu.sim.apiserver.patching import PatchError, json_patch, merge_patch, parse_patch_body, strategic_merge_patch

# ---------------------------------------------------------------- RFC 7386


@pytest.mark.parametrize(
    "target, patch, expected",
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc7386(target, patch, expected):
    before = copy.deepcopy(target)
    assert merge_patch(target, patch) == expected
    assert target == before  # the input is not modified


# ---------------------------------------------------------------- RFC 6902

DOC = {"metadata": {"annotations": {"a/b": "1"}}, "spec": {"list": [1, 2, 3]}}


def test_json_patch_operations():
    ops = [
        {"op": "add", "path": "/metadata/annotations/x~1y", "value": "2"},
        {"op": "replace", "path": "/metadata/annotations/a~1b", "value": "3"},
        {"op": "remove", "path": "/spec/list/0"},
        {"op": "add", "path": "/spec/list/-", "value": 4},
        {"op": "copy", "from": "/spec/list", "path": "/spec/copy"},
        {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
        {"op": "test", "path": "/spec/moved/2", "value": 4},
        {"op": "add", "path": "/spec/list/1", "value": 9},
    ]
    out = json_patch(DOC, ops)
    assert out == {
        "metadata": {"annotations": {"a/b": "3", "x/y": "2"}},
        "spec": {"list": [2, 9, 3, 4], "moved": [2, 3, 4]},
    }
    assert DOC["spec"]["list"] == [1, 2, 3]


@pytest.mark.parametrize(
    "ops, status, fragment",
    [
        ([{"op": "test", "path": "/spec/list/0", "value": 7}], 422, "test failed"),
        ([{"op": "test", "path": "/spec/list/0", "value": True}], 422, "test failed"),
        ([{"op": "remove", "path": "/metadata/labels"}], 422, "nonexistent key"),
        ([{"op": "replace", "path": "/nope/x", "value": 1}], 422, "missing path"),
        ([{"op": "add", "path": "/spec/list/9", "value": 1}], 422, "out of bounds"),
        ([{"op": "add", "path": "/spec/list/01", "value": 1}], 422, "invalid array index"),
        ([{"op": "jump", "path": "/spec"}], 400, "unexpected kind"),
        ([{"op": "add", "value": 1}], 400, "missing 'path'"),
        ([{"op": "add", "path": "/x"}], 400, "missing 'value'"),
        ([{"op": "add", "path": "x", "value": 1}], 400, "must start with '/'"),
        (["add"], 400, "must be an object"),
    ],
)
def test_json_patch_errors(ops, status, fragment):
    with pytest.raises(PatchError, match=fragment) as err:
        json_patch(DOC, ops)
    assert err.value.status == status


def test_patch_body_decoding_is_a_bad_request():
    with pytest.raises(PatchError) as err:
        parse_patch_body(b"{not json", dict)
    assert err.value.status == 400
    with pytest.raises(PatchError, match="must be an array"):
        parse_patch_body(b"{}", list)


# ---------------------------------------------------------------- strategic merge

POD = {
    "kind": "Pod",
    "metadata": {"name": "p", "annotations": {"keep": "1", "drop": "2"}, "finalizers": ["a", "b"]},
    "spec": {
        "containers": [
            {"name": "c0", "image": "i0", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
            {"name": "c1", "image": "i1"},
        ],
        "tolerations": [{"key": "k1"}, {"key": "k2"}],
    },
    "status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "PodScheduled", "status": "True"}]},
}

NODE = {
    "kind": "Node",
    "metadata": {"name": "n", "labels": {"a": "1"}},
    "status": {
        "capacity": {"cpu": "8", "volcano.sh/vgpu-number": "10"},
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
    },
}


def smp(obj, patch):
    before = copy.deepcopy(obj)
    out = strategic_merge_patch(obj, patch, obj["kind"])
    assert obj == before
    return out


def test_maps_merge_and_null_deletes():
    out = smp(POD, {"metadata": {"annotations": {"drop": None, "new": "3"}}})
    assert out["metadata"]["annotations"] == {"keep": "1", "new": "3"}
    assert out["spec"] == POD["spec"]


def test_containers_merge_by_name_recursively():
    out = smp(
        POD,
        {
            "spec": {
                "containers": [
                    {"name": "c1", "image": "i1b"},
                    {"name": "c0", "env": [{"name": "B", "value": "x"}]},
                    {"name": "c2", "image": "i2"},
                ]
            }
        },
    )
    names = [c["name"] for c in out["spec"]["containers"]]
    assert names == ["c0", "c1", "c2"]
    assert out["spec"]["containers"][1]["image"] == "i1b"
    assert out["spec"]["containers"][0]["image"] == "i0"
    assert out["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "x"}]


def test_delete_directive_removes_a_list_element():
    out = smp(POD, {"spec": {"containers": [{"name": "c0", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["c1"]


def test_conditions_merge_by_type():
    out = smp(POD, {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert out["status"]["conditions"] == [
        {"type": "Ready", "status": "True"},
        {"type": "PodScheduled", "status": "True"},
    ]


def test_list_without_strategy_is_replaced():
    out = smp(POD, {"spec": {"tolerations": [{"key": "k3"}]}})
    assert out["spec"]["tolerations"] == [{"key": "k3"}]


def test_primitive_merge_list_is_a_union_with_delete_directive():
    out = smp(POD, {"metadata": {"finalizers": ["b", "c"], "$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == ["b", "c"]


def test_replace_directive_on_a_map_and_on_a_list():
    out = smp(POD, {"metadata": {"annotations": {"only": "x", "$patch": "replace"}}})
    assert out["metadata"]["annotations"] == {"only": "x"}
    out = smp(POD, {"spec": {"containers": [{"name": "z", "image": "z"}, {"$patch": "replace"}]}})
    assert out["spec"]["containers"] == [{"name": "z", "image": "z"}]


def test_delete_directive_on_a_map():
    out = smp(POD, {"metadata": {"annotations": {"$patch": "delete"}}})
    assert "annotations" not in out["metadata"]


def test_retain_keys_and_set_element_order():
    out = smp(POD, {"spec": {"$retainKeys": ["containers"], "containers": [{"name": "c0"}]}})
    assert list(out["spec"]) == ["containers"]
    out = smp(POD, {"spec": {"$setElementOrder/containers": [{"name": "c1"}, {"name": "c0"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["c1", "c0"]


def test_node_status_maps_and_addresses():
    out = smp(
        NODE,
        {
            "status": {
                "capacity": {"volcano.sh/vgpu-number": "20", "cpu": None},
                "addresses": [{"type": "Hostname", "address": "n"}],
            }
        },
    )
    assert out["status"]["capacity"] == {"volcano.sh/vgpu-number": "20"}
    assert out["status"]["addresses"] == [
        {"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "Hostname", "address": "n"},
    ]


def test_missing_merge_key_is_unprocessable():
    with pytest.raises(PatchError, match="does not contain declared merge key: name") as err:
        smp(POD, {"spec": {"containers": [{"image": "x"}]}})
    assert err.value.status == 422


def test_unknown_kind_merges_maps_and_replaces_lists():
    cm = {"kind": "ConfigMap", "data": {"a": "1"}, "list": [1, 2]}
    assert smp(cm, {"data": {"b": "2"}, "list": [3]}) == {
        "kind": "ConfigMap",
        "data": {"a": "1", "b": "2"},
        "list": [3],
    }
