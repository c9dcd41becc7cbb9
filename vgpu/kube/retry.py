"""Background retries for writes that must eventually land (docs/protocol.md §5.2).

When the API server is unreachable, the Event, the ``bind-phase=failed`` patch, the success
patch and the node-lock release are queued here and retried with a backoff that starts at
0.1 s and doubles up to 10 s, until they succeed or are no longer needed (the pod is gone), so
that no pod stays ``allocating`` without an explanation once the API server is back.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from vgpu.kube.client import KubeApiError, KubeDeadlineExceeded, KubeError

log = logging.getLogger(__name__)

FIRST_DELAY_S = 0.1
MAX_DELAY_S = 10.0


@dataclass(order=True)
class _Task:
    due: float
    seq: int
    what: str = field(compare=False)
    fn: Callable[[], object] = field(compare=False)
    still_needed: Callable[[], bool] = field(compare=False)
    delay: float = field(compare=False, default=FIRST_DELAY_S)
    attempts: int = field(compare=False, default=0)


class RetryQueue:
    """One background thread; ``submit`` never blocks and never raises."""

    def __init__(self, first_delay: float = FIRST_DELAY_S, max_delay: float = MAX_DELAY_S):
        self.first_delay = first_delay
        self.max_delay = max_delay
        self._heap: list[_Task] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stop = False
        self._thread: threading.Thread | None = None
        self.done: list[str] = []  # what succeeded (for logs and tests)
        self.dropped: list[str] = []  # what was no longer needed

    def start(self) -> RetryQueue:
        if self._thread is None:
            self._stop = False
            self._thread = threading.Thread(target=self._run, name="vgpu-retry", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def pending(self) -> list[str]:
        with self._cond:
            return [t.what for t in self._heap]

    def submit(
        self,
        what: str,
        fn: Callable[[], object],
        still_needed: Callable[[], bool] = lambda: True,
        *,
        delay: float | None = None,
    ) -> None:
        d = self.first_delay if delay is None else delay
        task = _Task(time.monotonic() + d, next(self._seq), what, fn, still_needed, d)
        with self._cond:
            heapq.heappush(self._heap, task)
            self._cond.notify_all()
        log.info("queued for retry: %s", what)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stop and (not self._heap or self._heap[0].due > time.monotonic()):
                    self._cond.wait(None if not self._heap else max(0.0, self._heap[0].due - time.monotonic()))
                if self._stop:
                    return
                task = heapq.heappop(self._heap)
            self._attempt(task)

    def _attempt(self, task: _Task) -> None:
        try:
            needed = task.still_needed()
        except Exception:  # noqa: BLE001
            needed = True
        if not needed:
            log.info("retry dropped (no longer needed): %s", task.what)
            self.dropped.append(task.what)
            return
        task.attempts += 1
        try:
            task.fn()
        except KubeApiError as exc:
            if exc.not_found:
                log.info("retry dropped (object gone): %s", task.what)
                self.dropped.append(task.what)
                return
            self._again(task, exc)
            return
        except KubeError as exc:
            self._again(task, exc)
            return
        except Exception as exc:  # noqa: BLE001 - keep the thread alive; retry
            log.exception("retry of %s failed unexpectedly", task.what)
            self._again(task, exc)
            return
        log.info("retry succeeded after %d attempt(s): %s", task.attempts, task.what)
        self.done.append(task.what)

    def _again(self, task: _Task, exc: Exception) -> None:
        task.delay = min(task.delay * 2, self.max_delay)
        task.due = time.monotonic() + task.delay
        task.seq = next(self._seq)
        log.warning("%s failed (attempt %d): %s; next try in %.1f s", task.what, task.attempts, exc, task.delay)
        with self._cond:
            heapq.heappush(self._heap, task)
            self._cond.notify_all()


def retryable(exc: KubeError) -> bool:
    """Unreachable, 5xx, 429 and 409 may succeed when tried again; other refusals will not,
    and neither does a call refused because the caller's time budget is used up."""
    if isinstance(exc, KubeDeadlineExceeded):
        return False
    if isinstance(exc, KubeApiError):
        return exc.status >= 500 or exc.status in (409, 429)
    return True


def call_with_retries(
    fn: Callable[[], object],
    *,
    tries: int = 5,
    first_delay: float = 0.1,
    factor: float = 2.0,
    sleep: Callable[[float], None] = time.sleep,
) -> object:
    """Call ``fn`` up to ``tries`` times, sleeping ``first_delay × factor^k`` between tries.

    Re-raises the last :class:`KubeError` (at once when it is not :func:`retryable`).
    """
    delay = first_delay
    for attempt in range(1, tries + 1):
        try:
            return fn()
        except KubeError as exc:
            if attempt == tries or not retryable(exc):
                raise
            sleep(delay)
            delay *= factor
    raise AssertionError("unreachable")
