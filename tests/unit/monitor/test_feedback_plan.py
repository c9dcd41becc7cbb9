"""The feedback computation of docs/metrics.md §5, scenario by scenario (pure, no files)."""

from __future__ import annotations

from vgpu.monitor.feedback import RECENT_KERNEL, UTILIZATION_SWITCH, FeedbackInput, plan_feedback

GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def fb(key, rk, sw, p, *uuids):
    return FeedbackInput(key, rk, sw, p, tuple(uuids) or (GPU_A,))


def state(inputs, writes):
    """key -> (rk, sw) after applying the writes."""
    out = {c.key: [c.recent_kernel, c.utilization_switch] for c in inputs}
    for w in writes:
        out[w.key][0 if w.field == RECENT_KERNEL else 1] = w.new
    return {k: tuple(v) for k, v in out.items()}


def run(inputs, ticks=1):
    """Apply ``ticks`` feedback passes; returns the final state and every write."""
    all_writes = []
    for _ in range(ticks):
        writes = plan_feedback(inputs)
        all_writes.extend(writes)
        st = state(inputs, writes)
        inputs = [FeedbackInput(c.key, st[c.key][0], st[c.key][1], c.priority, c.uuids, c.counts) for c in inputs]
    return state(inputs, []), all_writes


def test_priority_0_blocks_priority_1_on_one_gpu():
    # Both just launched (libvgpu sets recent_kernel = 2); fresh files have utilization_switch = 1.
    final, writes = run([fb("hi", 2, 1, 0), fb("lo", 2, 1, 1)])
    assert final == {"hi": (1, 0), "lo": (-1, 1)}
    # hi is alone at its priority: its limiter is released; lo is blocked and limited.
    assert {(w.key, w.field, w.old, w.new) for w in writes} == {
        ("hi", RECENT_KERNEL, 2, 1),
        ("hi", UTILIZATION_SWITCH, 1, 0),
        ("lo", RECENT_KERNEL, 2, -1),
    }  # lo's switch is already 1: not rewritten


def test_blocked_container_is_released_once_the_higher_one_goes_idle():
    # Tick 1: hi active (2 -> 1), lo blocked.  Tick 2: hi 1 -> 0, no longer active: lo released (-1 -> 0).
    final, writes = run([fb("hi", 2, 1, 0), fb("lo", 2, 1, 1)], ticks=2)
    assert final == {"hi": (0, 0), "lo": (0, 0)}
    assert ("lo", RECENT_KERNEL, -1, 0) in {(w.key, w.field, w.old, w.new) for w in writes}


def test_two_tasks_of_equal_priority_share_and_are_both_limited():
    final, _ = run([fb("a", 2, 0, 1), fb("b", 2, 0, 1)])
    assert final == {"a": (1, 1), "b": (1, 1)}  # neither blocked; both rate-limited (active[u, p] = 2 > 1)


def test_equal_priority_after_activity_ends_switch_goes_back_to_zero():
    final, _ = run([fb("a", 2, 0, 1), fb("b", 2, 0, 1)], ticks=2)
    assert final == {"a": (0, 0), "b": (0, 0)}


def test_a_container_with_recent_kernel_1_is_not_active():
    # 1 -> 0 in pass 1: "still > 0" fails, so it blocks nobody.
    final, _ = run([fb("hi", 1, 1, 0), fb("lo", 2, 1, 1)])
    assert final == {"hi": (0, 0), "lo": (1, 0)}


def test_different_gpus_do_not_interact():
    final, _ = run([fb("hi", 2, 1, 0, GPU_A), fb("lo", 2, 1, 1, GPU_B)])
    assert final == {"hi": (1, 0), "lo": (1, 0)}


def test_shared_gpu_among_several_devices_counts():
    final, _ = run([fb("hi", 2, 1, 0, GPU_B), fb("lo", 2, 1, 1, GPU_A, GPU_B)])
    assert final == {"hi": (1, 0), "lo": (-1, 1)}


def test_arbitrary_int32_priorities_compare_numerically():
    # Upstream indexes a 2-element array: priorities other than 0/1 break there.  Ours compares values.
    final, _ = run([fb("a", 2, 1, -5), fb("b", 2, 1, 7), fb("c", 2, 1, 2**31 - 1)])
    assert final == {"a": (1, 0), "b": (-1, 1), "c": (-1, 1)}


def test_idle_lower_priority_is_not_blocked_but_marked_limited():
    # A blocked-by-nobody idle container keeps rk 0; with a higher one active it is blocked even when idle.
    final, _ = run([fb("hi", 2, 1, 0), fb("idle", 0, 0, 1)])
    assert final == {"hi": (1, 0), "idle": (-1, 1)}


def test_write_only_when_the_value_changes():
    assert plan_feedback([fb("a", 0, 0, 1)]) == []
    assert [(w.field, w.old, w.new) for w in plan_feedback([fb("a", 1, 0, 1)])] == [(RECENT_KERNEL, 1, 0)]
    # negative without a higher-priority active container: unblocked
    assert [(w.field, w.old, w.new) for w in plan_feedback([fb("a", -1, 0, 1)])] == [(RECENT_KERNEL, -1, 0)]
    # already blocked and still blocked: nothing to write
    assert plan_feedback([fb("hi", 2, 0, 0), fb("lo", -1, 1, 1)]) == [plan_feedback([fb("hi", 2, 0, 0)])[0]]


def test_container_without_valid_devices_is_never_active_nor_blocked():
    final, _ = run([FeedbackInput("none", 2, 1, 0, ()), fb("lo", 2, 1, 1)])
    assert final == {"none": (1, 0), "lo": (1, 0)}


def test_lone_pod_is_not_throttled():
    # docs/hami-core.md §7.2: a lone pod gets utilization_switch = 0 (unless its policy is force).
    final, _ = run([fb("solo", 2, 1, 1)])
    assert final == {"solo": (1, 0)}


def test_a_region_that_does_not_count_is_judged_but_never_judges():
    # docs/metrics.md §5.1: a region whose pod is unknown can be blocked, but blocks and crowds nobody.
    ghost = FeedbackInput("ghost", 2, 1, -(2**31), (GPU_A,), counts=False)
    final, _ = run(
        [ghost, fb("lo", 2, 1, 1), fb("hi", 2, 1, 0, GPU_B), FeedbackInput("ghost2", 2, 1, 5, (GPU_B,), False)]
    )
    assert final["lo"] == (1, 0)  # active alone on GPU_A among the regions that count: free
    assert final["ghost"] == (1, 0)  # nothing that counts is above it on GPU_A
    assert final["ghost2"] == (-1, 1)  # hi counts and is above it on GPU_B: blocked and limited
    assert final["hi"] == (1, 0)
    same = FeedbackInput("ghost", 2, 1, 1, (GPU_A,), counts=False)
    assert run([same, fb("lo", 2, 1, 1)])[0] == {"ghost": (1, 0), "lo": (1, 0)}  # never crowds either
