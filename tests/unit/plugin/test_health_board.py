"""The health board (one notification per change, to every listener) and recovery timers."""

from __future__ import annotations

import threading
import time

from vgpu.nvml.health import GpuHealth, RecoveryTimers


def test_changes_reach_every_listener_once_and_only_real_changes_notify():
    board = GpuHealth(["A", "B"])
    seen1, seen2 = [], []
    board.subscribe(seen1.append)
    unsubscribe = board.subscribe(seen2.append)
    assert board.mark_unhealthy("A", "Xid 79")
    assert not board.mark_unhealthy("A", "Xid 79 again")  # no change, no notification
    assert seen1 == seen2 == [{"A": False}]
    assert board.reason("A") == "Xid 79" and not board.is_healthy("A") and board.is_healthy("B")
    unsubscribe()
    assert board.mark_all_unhealthy(["A", "B"], "wait error") == {"B": False}
    assert seen1 == [{"A": False}, {"B": False}] and seen2 == [{"A": False}]
    assert board.mark_healthy("A")
    assert board.snapshot() == {"A": True, "B": False}


def test_a_failing_listener_does_not_block_the_others():
    board = GpuHealth(["A"])
    got = []

    def broken(_changed):
        raise RuntimeError("boom")

    board.subscribe(broken)
    board.subscribe(got.append)
    board.mark_unhealthy("A", "x")
    assert got == [{"A": False}]


def _wait(predicate, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_recovery_marks_healthy_after_the_window_when_the_probe_succeeds():
    board = GpuHealth(["A"])
    probes: list[tuple[str, float]] = []
    t0 = time.monotonic()
    timers = RecoveryTimers(board, 0.3, probe=lambda u: probes.append((u, time.monotonic())) or True)
    try:
        board.mark_unhealthy("A", "Xid 79")
        timers.arm("A")
        assert _wait(lambda: board.is_healthy("A"), 3)
        assert probes and probes[0][0] == "A" and probes[0][1] - t0 >= 0.3
    finally:
        timers.stop()


def test_recovery_rearms_while_the_probe_fails():
    board = GpuHealth(["A"])
    ok = threading.Event()
    calls = []

    def probe(uuid):
        calls.append(time.monotonic())
        return ok.is_set()

    timers = RecoveryTimers(board, 0.1, probe=probe)
    try:
        board.mark_unhealthy("A", "Xid 79")
        timers.arm("A")
        assert _wait(lambda: len(calls) >= 3, 3)
        assert not board.is_healthy("A")
        assert all(b - a >= 0.09 for a, b in zip(calls, calls[1:], strict=False))  # re-armed, not spinning
        ok.set()
        assert _wait(lambda: board.is_healthy("A"), 3)
    finally:
        timers.stop()


def test_a_new_fatal_event_restarts_the_timer():
    board = GpuHealth(["A"])
    calls = []
    timers = RecoveryTimers(board, 0.4, probe=lambda u: calls.append(time.monotonic()) or True)
    try:
        board.mark_unhealthy("A", "x")
        timers.arm("A")
        time.sleep(0.25)  # let part of the window pass (this IS the behaviour under test)
        t_rearm = time.monotonic()
        timers.arm("A")
        assert _wait(lambda: board.is_healthy("A"), 3)
        assert len(calls) == 1 and calls[0] - t_rearm >= 0.4
    finally:
        timers.stop()
