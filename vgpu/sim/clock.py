"""Simulated time for tests and the stand-ins: a :class:`vgpu.kube.clock.Clock` that moves only when told.

:class:`FakeClock` runs minutes of handshake traffic in milliseconds: ``advance()`` moves time
and wakes every waiter, so nothing sleeps in real time to pass simulated time.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime


class FakeClock:
    """Simulated time: starts at ``start`` (Unix seconds) and moves only through ``advance``.

    ``unix()`` is a drop-in ``clock`` callable for the simulated API server and the scheduler
    emulator, so all parties agree on the time.
    """

    _GUARD_S = 0.5  # a waiter re-checks at least this often in real time (robust to missed wake-ups)

    def __init__(self, start: float = 1_784_880_000.0):
        self._t = float(start)
        self._lock = threading.Lock()
        self._waiters: set[threading.Condition] = set()

    def unix(self) -> float:
        with self._lock:
            return self._t

    def monotonic(self) -> float:
        return self.unix()

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.unix(), UTC)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time only moves forward")
        with self._lock:
            self._t += seconds
            waiters = list(self._waiters)
        for cond in waiters:
            with cond:
                cond.notify_all()

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is not None and timeout <= 0:
            return
        with self._lock:
            self._waiters.add(cond)
        try:
            cond.wait(self._GUARD_S)
        finally:
            with self._lock:
                self._waiters.discard(cond)

    def __repr__(self) -> str:
        return f"FakeClock({self.now().isoformat()})"
