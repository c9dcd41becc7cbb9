"""The NVML retry schedule of a daemon with --fail-on-init-error=false (vgpu/nvml/backoff.py)."""

from __future__ import annotations

import itertools

from vgpu.nvml import backoff


def test_doubles_from_one_second_up_to_thirty():
    assert list(itertools.islice(backoff.retry_delays(), 8)) == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_the_schedule_never_ends():
    assert sum(1 for _ in itertools.islice(backoff.retry_delays(0.5, 2.0), 1000)) == 1000
