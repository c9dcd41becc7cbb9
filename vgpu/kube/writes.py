"""The one way Allocate writes to the API server: try now, within the time budget, else queue.

Every write of an Allocate — the ``devices-to-allocate`` progress / ``bind-phase=success`` PATCH,
``bind-phase=failed``, the pod and node Events and the node-lock release — goes through
:func:`write`: up to ``tries.count`` calls now (``first_delay × factor^k`` apart, and only again
after an error :func:`vgpu.kube.retry.retryable` allows), all inside the caller's
:meth:`vgpu.kube.client.KubeClient.deadline`, so a used-up budget ends them at once; then, when
``hand_off`` accepts the error, the same call goes to the background
:class:`vgpu.kube.retry.RetryQueue` (docs/protocol.md §5.2: 0.1 s doubling to 10 s, until it
lands or is no longer needed).  The caller reads the :class:`Outcome`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from vgpu.kube.client import KubeApiError, KubeError
from vgpu.kube.retry import RetryQueue, call_with_retries

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tries:
    """How hard to try now: ``count`` calls, ``first_delay × factor^k`` seconds apart."""

    count: int = 1
    first_delay: float = 0.1
    factor: float = 2.0


ONCE = Tries()


@dataclass(frozen=True)
class Outcome:
    value: object = None
    """What the call returned, when it landed now."""
    error: KubeError | None = None
    """Why it did not land now (None when it did, or when it was not tried now)."""
    queued: bool = False
    """Handed to the background retry queue."""

    @property
    def done(self) -> bool:
        return self.error is None and not self.queued


def gone(exc: KubeError) -> bool:
    """404: the object is gone, so a write to it is moot (the retry queue drops such tasks too)."""
    return isinstance(exc, KubeApiError) and exc.not_found


def write(
    what: str,
    fn: Callable[[], object],
    *,
    queue: RetryQueue | None,
    tries: Tries = ONCE,
    now: bool = True,
    hand_off: Callable[[KubeError], bool] = lambda _exc: True,
    still_needed: Callable[[], bool] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Call ``fn`` now (unless ``now`` is False); if it fails and ``hand_off(error)``, queue it.

    ``what`` names the write in logs and in the queue; ``still_needed`` lets the queue drop it
    once moot (e.g. the pod left the cache).  Never raises :class:`KubeError`.
    """
    error: KubeError | None = None
    if now:
        try:
            return Outcome(
                value=call_with_retries(
                    fn, tries=tries.count, first_delay=tries.first_delay, factor=tries.factor, sleep=sleep
                )
            )
        except KubeError as exc:
            log.warning("%s: %s", what, exc)
            error = exc
    if queue is None or (error is not None and not hand_off(error)):
        return Outcome(error=error)
    if still_needed is None:
        queue.submit(what, fn)
    else:
        queue.submit(what, fn, still_needed=still_needed)
    return Outcome(error=error, queued=True)
