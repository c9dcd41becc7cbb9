"""Injectable time for the node registrar (and anything else that schedules writes).

Production uses :class:`RealClock`.  Tests use the stand-ins' ``FakeClock`` to run minutes of
handshake traffic in milliseconds, so nothing sleeps in real time to pass simulated time.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never jumps (deadlines)."""

    def now(self) -> datetime:
        """Aware wall-clock time (what we write into ``Reported <time>``)."""

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on ``cond`` (held by the caller) for at most ``timeout`` seconds of this clock."""


class RealClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)
