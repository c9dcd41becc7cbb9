"""Node registration and the handshake (docs/protocol.md §2, docs/decisions.md decision 4; R-2, R-5, R-6).

Pure policy tests, then the real registrar (watch over HTTP, real patches) against the simulated
API server and the Volcano scheduler emulator, all three on one :class:`FakeClock` so that ten
simulated minutes take about a second.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import timedelta, timezone

import pytest
from kubernetes import client as k8s

from vgpu.kube.client import KubeClient
from vgpu.kube.registrar import (
    HandshakeMode,
    NodeRegistrar,
    RegistrarPolicy,
    build_register_value,
)
from vgpu.kube.watchcache import newer_or_equal, resource_version_of
from vgpu.protocol import keys
from vgpu.sim.apiserver import ApiServer
from vgpu.sim.clock import FakeClock
from vgpu.sim.scheduler import VolcanoSchedulerEmulator
from vgpu.sim.scheduler.model import SchedulerConfig

from .conftest import NODE, gpu, make_config

REG = build_register_value([gpu(0), gpu(1)], make_config())
AUTO, ON, OFF = HandshakeMode.AUTO, HandshakeMode.ON, HandshakeMode.OFF


# ------------------------------------------------------------------ pure policy


def started(mode: HandshakeMode, t: float = 0.0) -> RegistrarPolicy:
    p = RegistrarPolicy(mode, REG)
    p.observe({}, t)
    plan = p.due(t)
    if mode is OFF:
        assert plan is not None and not plan.handshake and plan.register == REG
    else:
        assert plan is not None and plan.handshake and plan.register == REG and plan.reason == "startup"
    p.written(plan, t)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Reported x"} if mode is not OFF else {keys.REGISTER: REG}, t)
    return p


def test_register_value_six_fields_sorted_by_minor_unhealthy_kept():
    value = build_register_value(
        [gpu(1), gpu(0)], make_config(device_split_count=4, gpu_memory_factor=10), {gpu(1).uuid: False}
    )
    assert value == (
        f"{gpu(0).uuid},4,8192,NVIDIA-NVIDIA A100-SXM4-80GB,true,hami-core:"
        f"{gpu(1).uuid},4,8192,NVIDIA-NVIDIA A100-SXM4-80GB,false,hami-core:"
    )
    assert build_register_value([], make_config()) is None


def test_auto_answers_a_stamp_30s_after_observation_and_nothing_else():
    p = started(AUTO)
    assert p.due(1000) is None  # steady state: nothing
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Requesting_2025.08.04 02:27:07"}, 10.0)
    assert p.next_deadline() == 40.0
    assert p.due(39.9) is None
    plan = p.due(40.0)
    assert plan is not None and plan.handshake and not plan.writes_register
    p.written(plan, 40.0)
    assert p.due(500) is None


def test_auto_stamp_seen_while_our_write_is_in_flight_gets_its_own_reply():
    p = started(AUTO)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Requesting_a"}, 0.0)
    plan = p.due(30.0)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Deleted_b"}, 30.0)  # arrives before the PATCH returns
    p.written(plan, 30.0)
    assert p.reply_at == 60.0  # the Deleted came after the plan was made: it gets its own reply
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Requesting_c"}, 31.0)
    assert p.reply_at == 60.0
    p.written(p.due(60.0), 60.0)
    assert p.reply_at is None


def test_auto_retries_stay_in_window_then_asap():
    p = started(AUTO)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Requesting_a"}, 0.0)
    times = []
    t = 30.0
    for _ in range(8):
        plan = p.due(t)
        assert plan is not None
        times.append(t)
        p.failed(plan, t)
        t = p.next_deadline()
    assert all(20 <= x <= 40 for x in times if x <= 40)
    assert len([x for x in times if x <= 40]) >= 4
    assert times[-1] - times[-2] <= 5.0  # past the window: as soon as possible (capped backoff)


def test_auto_key_removed_rewritten_at_once_but_20s_after_previous_write():
    p = started(AUTO, 0.0)
    p.observe({keys.REGISTER: REG}, 5.0)
    assert p.next_deadline() == 20.0 and p.due(19.0) is None
    plan = p.due(20.0)
    assert plan.handshake and plan.reason == "handshake key missing"
    p.written(plan, 20.0)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Reported y"}, 20.0)
    p.observe({keys.REGISTER: REG}, 100.0)
    assert p.due(100.0).handshake


def test_register_reasserted_within_5s_at_most_once_per_5s():
    p = started(OFF, 0.0)
    p.observe({}, 1.0)  # someone removed it 1 s after our write
    assert p.due(4.9) is None and p.next_deadline() == 5.0
    plan = p.due(5.0)
    assert plan.register == REG and not plan.handshake
    p.written(plan, 5.0)
    p.observe({keys.REGISTER: REG}, 5.0)
    p.observe({keys.REGISTER: "junk"}, 6.0)
    assert p.due(6.0) is None and p.next_deadline() == 10.0
    # A health change: new desired value, written once (≤ 1 per 5 s).
    p.set_register(REG.replace("true", "false", 1))
    assert p.due(10.0).register == REG.replace("true", "false", 1)


def test_off_never_writes_handshake_and_equal_register_is_not_written():
    p = RegistrarPolicy(OFF, REG)
    p.observe({keys.REGISTER: REG, keys.HANDSHAKE: "Requesting_a"}, 0.0)
    assert p.due(0.0) is None and p.next_deadline() is None
    p.observe({keys.REGISTER: REG}, 100.0)
    assert p.due(1000.0) is None


def test_on_mode_every_30s_with_register_and_5s_after_error():
    p = started(ON, 0.0)
    assert p.next_deadline() == 30.0
    plan = p.due(30.0)
    assert plan.handshake and plan.register == REG
    p.failed(plan, 30.0)
    assert p.next_deadline() == 35.0
    p.written(p.due(35.0), 35.0)
    assert p.next_deadline() == 65.0


def test_no_gpus_means_register_deleted():
    p = RegistrarPolicy(OFF, None)
    p.observe({keys.REGISTER: "stale"}, 0.0)
    plan = p.due(0.0)
    assert plan.writes_register and plan.register is None
    assert plan.annotations("x") == {keys.REGISTER: None}


def test_nothing_written_before_the_node_is_seen():
    p = RegistrarPolicy(AUTO, REG)
    assert p.due(0.0) is None and p.next_deadline() is None
    assert math.isinf(p.retry_at)


# ------------------------------------------------------------------ against the emulator


class Harness:
    """API server, emulator and registrar on one fake clock; ``step()`` = one simulated second."""

    def __init__(self, version: str, mode: HandshakeMode, tz_hours: float = 0.0, loop: bool = False):
        self.clock = FakeClock()
        self.api = ApiServer(clock=self.clock.unix, bookmark_interval=0.5).start()
        self.api.store.create(
            "nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": NODE},
                "status": {
                    "allocatable": {
                        "volcano.sh/vgpu-number": "20",
                        "volcano.sh/vgpu-memory": "163840",
                        "volcano.sh/vgpu-cores": "200",
                    }
                },
            },
        )
        self.client = KubeClient(self.api.client_configuration(), user_agent="vgpu-device-plugin")
        self.api_client = self.api.api_client()
        self.sched = VolcanoSchedulerEmulator(
            k8s.CoreV1Api(self.api_client),
            SchedulerConfig(version=version, tz=timezone(timedelta(hours=tz_hours))),
            clock=self.clock.unix,
        )
        self.loop = loop
        self.reg = NodeRegistrar(self.client, NODE, REG, mode, clock=self.clock).start(loop=loop)
        self.usable: list[bool] = []
        self.deleted_seen = 0

    def node(self) -> dict:
        return self.api.store.get("nodes", None, NODE)

    def _caught_up(self) -> None:
        target = resource_version_of(self.node())
        assert self.reg.cache.wait_for(
            lambda c: c.get(NODE) is not None and newer_or_equal(resource_version_of(c.get(NODE)), target), 5
        )

    def settle(self) -> None:
        """Let everybody react until nobody writes (both sides see every state)."""
        for _ in range(20):
            self._caught_up()
            if self.loop:  # the registrar's own thread decides; wait until it has seen everything
                before = len(self.plugin_node_writes())
                assert self.reg.wait_idle(self.clock.monotonic(), 5)
                self._caught_up()
                wrote = len(self.plugin_node_writes()) > before
            else:
                wrote = self.reg.tick()
            events = self.sched.sync_nodes()
            hs = (self.node()["metadata"].get("annotations") or {}).get(keys.HANDSHAKE, "")
            self.deleted_seen += hs.startswith("Deleted")
            if not wrote and not events:
                return
        raise AssertionError("the plugin and the scheduler never settle")

    def step(self, seconds: float = 1.0, heartbeat: bool = False) -> None:
        self.clock.advance(seconds)
        if heartbeat:
            self.sched.resync_nodes()  # a node event without a change (kubelet status / informer resync)
        self.settle()
        self.usable.append(NODE in self.sched.core.nodes)

    def plugin_node_writes(self) -> list[float]:
        return [
            r.time
            for r in self.api.requests.requests(verb="patch", resource="nodes")
            if r.user_agent.startswith("vgpu-device-plugin")
        ]

    def close(self) -> None:
        self.reg.stop()
        self.client.close()
        self.api_client.close()
        self.api.stop()


@pytest.fixture
def harness() -> Iterator:
    made: list[Harness] = []

    def make(*a, **kw) -> Harness:
        h = Harness(*a, **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()


def _per_minute(times: list[float], t0: float, minutes: int) -> list[int]:
    return [sum(1 for t in times if t0 + 60 * m <= t < t0 + 60 * (m + 1)) for m in range(minutes)]


def test_auto_vs_v115_five_minutes_schedulable_with_at_most_2_writes_per_minute(harness):
    h = harness("v1.15", AUTO)
    t0 = h.clock.unix()
    h.settle()
    for s in range(300):
        h.step(1.0, heartbeat=s % 10 == 0)
    writes = h.plugin_node_writes()
    per_min = _per_minute(writes, t0, 5)
    assert all(w <= 2 for w in per_min), per_min
    assert sum(per_min) >= 9  # it did answer: ≈ 2/min
    assert all(h.usable), f"unschedulable at seconds {[i for i, u in enumerate(h.usable) if not u]}"
    assert h.deleted_seen == 0 and h.sched.counters.handshake_deleted == 0
    print(
        f"v1.15, 5 min: plugin node writes per minute {per_min}; scheduler writes {h.sched.counters.handshake_writes}"
    )


def test_r2_ten_minutes_v115_15_to_30_writes_never_deleted_no_register_patches(harness):
    h = harness("v1.15", AUTO)
    h.settle()
    for s in range(600):
        h.step(1.0, heartbeat=s % 7 == 0)
    bodies = [
        r
        for r in h.api.requests.requests(verb="patch", resource="nodes")
        if r.user_agent.startswith("vgpu-device-plugin")
    ]
    handshake = [r for r in bodies if keys.HANDSHAKE.encode() in r.body]
    register = [r for r in bodies[1:] if keys.REGISTER.encode() in r.body]
    assert 15 <= len(handshake) <= 30, len(handshake)
    assert register == []  # steady state: register only at startup
    assert h.sched.counters.handshake_deleted == 0 and all(h.usable)


def test_r2_ten_minutes_master_exactly_one_node_patch(harness):
    h = harness("master", AUTO)
    h.settle()
    for s in range(600):
        h.step(1.0, heartbeat=s % 10 == 0)
    assert len(h.plugin_node_writes()) == 1
    assert all(h.usable)


@pytest.mark.parametrize("mode", [ON, OFF])
def test_on_and_off_against_v115(harness, mode):
    h = harness("v1.15", mode)
    t0 = h.clock.unix()
    h.settle()
    for _ in range(120):
        h.step(1.0)
    writes = h.plugin_node_writes()
    if mode is ON:
        assert _per_minute(writes, t0, 2) == [2, 2]
        assert all(h.usable)
    else:
        assert len(writes) == 1  # register only
        assert not any(h.usable)  # v1.15 needs a handshake: "node not initialized"


def test_r5_register_removed_is_back_within_5s_with_one_patch(harness):
    h = harness("master", AUTO)
    h.settle()
    before = len(h.plugin_node_writes())
    h.api.store.patch("nodes", None, NODE, {"metadata": {"annotations": {keys.REGISTER: None}}})
    for _ in range(5):
        h.step(1.0)
    assert h.node()["metadata"]["annotations"][keys.REGISTER] == REG
    assert len(h.plugin_node_writes()) == before + 1


@pytest.mark.parametrize("hours", [8.0, -8.0])
def test_r6_scheduler_timezone_offsets(harness, hours):
    """Replies are timed from our own observation, never from the stamp text.

    East of UTC (+8 h) the node stays schedulable with no Deleted at all.  West of UTC (−8 h) Volcano
    itself expires its own fresh stamp at the next node event (its stamp reads as 8 h old), so the
    node flaps whatever the plugin does; the plugin still answers every stamp 30 s after seeing it,
    and never more than 2 writes/min."""
    h = harness("v1.15", AUTO, tz_hours=hours)
    t0 = h.clock.unix()
    h.settle()
    for s in range(180):
        h.step(1.0, heartbeat=s % 10 == 0)
    per_min = _per_minute(h.plugin_node_writes(), t0, 3)
    assert all(w <= 2 for w in per_min) and sum(per_min) >= 5, per_min
    if hours > 0:
        assert all(h.usable) and h.sched.counters.handshake_deleted == 0


def test_registrar_thread_on_fake_clock_answers_every_stamp_30s_later(harness):
    """The production loop (deadline → clock wait → tick), not ``tick()`` driven by the test."""
    h = harness("v1.15", AUTO, loop=True)
    t0 = h.clock.unix()
    h.settle()
    for _ in range(150):
        h.step(1.0)
    writes = [round(t - t0) for t in h.plugin_node_writes()]
    assert writes == [0, 30, 60, 90, 120, 150], writes
    assert all(h.usable)


def test_mode_parsing_and_renamed_resource_warning():
    assert HandshakeMode.parse(" Auto ") is AUTO
    with pytest.raises(ValueError, match="must be one of auto, on, off"):
        HandshakeMode.parse("sometimes")
    from vgpu.kube.registrar import warn_renamed_resources

    out = warn_renamed_resources(
        [("example.com/gpu", "volcano.sh/vgpu-number"), ("volcano.sh/vgpu-memory", "volcano.sh/vgpu-memory")]
    )
    assert len(out) == 1 and "Volcano master (v1.16+)" in out[0] and "example.com/gpu" in out[0]


def test_no_kubeconfig_and_not_in_cluster_is_a_clear_error(monkeypatch):
    from vgpu.kube.client import KubeConfigError, load_configuration

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(KubeConfigError, match="no kubeconfig given .* and no in-cluster service account"):
        load_configuration(None)
    with pytest.raises(KubeConfigError, match="cannot load kubeconfig /nonexistent/kc"):
        load_configuration("/nonexistent/kc")
