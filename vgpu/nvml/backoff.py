"""How often a daemon that waits for NVML tries again (``--fail-on-init-error=false``).

Both daemons use the same schedule (docs/configuration.md §5.1): the first retry 1 s after the
failure, then twice the previous delay, at most every 30 s, so a driver that finishes loading is
noticed within seconds and a node without a GPU costs one NVML call per 30 s.
"""

from __future__ import annotations

from collections.abc import Iterator

FIRST_S = 1.0
MAX_S = 30.0


def retry_delays(first_s: float = FIRST_S, max_s: float = MAX_S) -> Iterator[float]:
    """1, 2, 4, 8, 16, 30, 30, ... seconds (by default)."""
    delay = first_s
    while True:
        yield delay
        delay = min(delay * 2, max_s)
