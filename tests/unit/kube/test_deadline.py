"""The Allocate time budget: the kubelet waits on Allocate, which must not block for more than
about 10 s (docs/kubelet-api.md §6), whatever the API server does."""

from __future__ import annotations

import time

import pytest

from vgpu.kube.client import KubeClient, KubeDeadlineExceeded, KubeUnavailable
from vgpu.kube.retry import call_with_retries
from vgpu.plugin import allocator as allocate_mod
from vgpu.plugin.devices import ResourceKind
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer

from .conftest import NODE, NUMBER, dev
from .test_allocate import envs


@pytest.fixture
def api():
    server = ApiServer().start()
    server.store.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}})
    client = KubeClient(server.client_configuration())
    yield server, client
    client.close()
    server.stop()


def test_calls_inside_a_deadline_are_cut_to_the_time_left_then_refused_at_once(api):
    server, client = api
    server.faults.delay(3.0, "get", "nodes")
    t0 = time.monotonic()
    with client.deadline(0.5):
        with pytest.raises(KubeUnavailable):
            client.get_node(NODE)  # would take 3 s: cut to the 0.5 s left
        assert time.monotonic() - t0 < 1.5
        with pytest.raises(KubeDeadlineExceeded):
            client.get_node(NODE)  # nothing left: refused without a request
        # and never retried: a retry loop gives up at once
        with pytest.raises(KubeDeadlineExceeded):
            call_with_retries(lambda: client.get_node(NODE), tries=5, first_delay=1.0)
    assert time.monotonic() - t0 < 1.5
    server.faults.clear()
    assert client.get_node(NODE)["metadata"]["name"] == NODE  # outside the block: normal timeouts


def test_nested_deadline_keeps_the_earlier_end(api):
    _, client = api
    with client.deadline(0.2):
        with client.deadline(30):
            time.sleep(0.25)  # let the outer budget run out (a duration, not a synchronisation)
            with pytest.raises(KubeDeadlineExceeded):
                client.get_node(NODE)
        with pytest.raises(KubeDeadlineExceeded):
            client.get_node(NODE)
    assert client.get_node(NODE)


def test_allocate_on_a_slow_api_server_answers_within_its_budget_and_records_success_later(sim, monkeypatch):
    monkeypatch.setattr(allocate_mod, "ALLOCATE_BUDGET_S", 1.0)
    sim.schedule("slow", [{"name": "c", "limits": {NUMBER: 1}}], [[dev(0)]], vgpu_time=100)
    assert sim.cache.wait_for(lambda c: len(c.items()) == 1, 5)
    sim.api.faults.delay(3.0, "patch", "pods", count=1)  # the success PATCH hangs for 3 s
    t0 = time.monotonic()
    r = sim.allocate(ResourceKind.NUMBER, sim.number_ids(0))
    elapsed = time.monotonic() - t0
    assert elapsed < 2.0, f"Allocate blocked {elapsed:.1f} s"
    assert envs(r)["NVIDIA_VISIBLE_DEVICES"] == sim.managers[ResourceKind.NUMBER].gpus[0].uuid
    # The completion is retried in the background and lands once the server answers again.
    assert sim.api.store.wait_for(
        lambda _store: sim.annotations("slow").get(keys.BIND_PHASE) == "success", 10, "bind-phase=success"
    )
