"""GetPreferredAllocation's fill step keeps a container's IDs on one NUMA node when it can."""

from __future__ import annotations

from vgpu.plugin.preference import fill_node, preferred_ids

NODES = {"0": 0, "1": 0, "2": 1, "3": 1, "4": None}


def key(i: str) -> tuple[int, int]:
    gpu, n = i.split("-")
    return int(gpu), int(n)


def node_of(i: str) -> int | None:
    return NODES[i.split("-")[0]]


def gpu_of(i: str) -> str:
    return "G" + i.split("-")[0]


def test_open_choice_takes_the_first_node_that_holds_the_whole_request():
    avail = ["0-0", "2-0", "2-1", "3-0"]
    assert preferred_ids(avail, [], 2, key) == ["0-0", "2-0"]  # plain order crosses nodes
    assert preferred_ids(avail, [], 2, key, numa_of=node_of) == ["2-0", "2-1"]
    assert preferred_ids(avail, [], 1, key, numa_of=node_of) == ["0-0"]


def test_already_chosen_ids_pick_the_node():
    avail = ["0-0", "1-0", "2-0", "2-1"]
    assert preferred_ids(avail, ["2-1"], 2, key, numa_of=node_of) == ["2-1", "2-0"]
    assert preferred_ids(avail, [], 2, key, targets=["G1"], gpu_of=gpu_of, numa_of=node_of) == ["1-0", "0-0"]


def test_scheduler_targets_beat_numa():
    avail = ["0-0", "2-0", "3-0"]
    got = preferred_ids(avail, [], 2, key, targets=["G0", "G3"], gpu_of=gpu_of, numa_of=node_of)
    assert got == ["0-0", "3-0"]


def test_no_node_big_enough_or_unknown_nodes_keep_plain_order():
    avail = ["0-0", "2-0", "4-0", "4-1"]
    assert preferred_ids(avail, [], 3, key, numa_of=node_of) == ["0-0", "2-0", "4-0"]
    assert fill_node([], ["4-0", "4-1"], 2, node_of) is None
    assert fill_node(["4-0", "3-0"], [], 1, node_of) == 1
    assert fill_node(["0-0"], ["2-0"], 0, node_of) is None
