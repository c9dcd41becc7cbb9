"""Node registration: the register annotation and the handshake.

docs/protocol.md §2.1–§2.3, docs/decisions.md decision 4.

Two layers, so the policy can be tested against simulated time:

* :class:`RegistrarPolicy` — pure: given what the Node looks like and what time it is, which
  write (register and/or handshake, combined into one patch) is due, and when the next one is.
* :class:`NodeRegistrar` — watches this Node (field selector ``metadata.name``), feeds every
  observation to the policy, performs the strategic-merge patches and writes each PATCH response
  through to its cache.

Register (all modes): patched only when the encoded value differs from the Node's; a missing or
different value is re-asserted within 5 s, at most once per 5 s.  The record is Volcano's fixed
6-field format; HAMi-WebUI expects HAMi's own 7-field one and cannot read it (docs/failures.md R-7).
A node without advertised GPUs has no register annotation (the grammar needs ≥ 1 record), so a
stale one is deleted.

Handshake modes (``--handshake``):

* ``auto`` — ``Reported <now>`` once at startup.  When the watch shows a *new* value containing
  ``Requesting`` or ``Deleted``, answer with ``Reported <now>`` at *t_obs* + 30 s, *t_obs* being
  our own clock when the watch delivered it (the stamp text is never parsed: it is scheduler
  local time read as UTC, docs/failures.md R-6).  Retries stay inside [*t_obs*+20, *t_obs*+40] while
  possible, otherwise as soon as possible.  A removed key is re-written at once, but never sooner
  than 20 s after our previous handshake write.  Against Volcano master (which never stamps) that
  is one write per plugin start; against v1.9–v1.15 ≈ 2 writes/min.
* ``on`` — upstream: register + ``Reported <now>`` every 30 s; 5 s after an error.
* ``off`` — never writes the handshake key.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from vgpu.config.model import EffectiveConfig
from vgpu.kube.caches import node_cache
from vgpu.kube.client import KubeClient, KubeError
from vgpu.kube.clock import Clock, RealClock
from vgpu.kube.watchcache import WatchCache
from vgpu.nvml.device import GpuInfo
from vgpu.protocol import RegisterRecord, encode_reported, keys, register_devmem, register_records, register_type
from vgpu.protocol.handshake import DELETED, REQUESTING

log = logging.getLogger(__name__)

REGISTER_MIN_SPACING_S = 5.0
REPLY_DELAY_S = 30.0
REPLY_WINDOW_S = (20.0, 40.0)
HANDSHAKE_MIN_SPACING_S = 20.0
ON_MODE_PERIOD_S = 30.0
ON_MODE_ERROR_RETRY_S = 5.0
ERROR_BACKOFF_S = (1.0, 5.0)  # first, cap


class HandshakeMode(enum.StrEnum):
    AUTO = "auto"
    ON = "on"
    OFF = "off"

    @classmethod
    def parse(cls, text: str) -> HandshakeMode:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"--handshake: must be one of auto, on, off (got {text!r})") from None


def build_register_value(
    gpus: Sequence[GpuInfo], cfg: EffectiveConfig, health: Mapping[str, bool] | None = None
) -> str | None:
    """The ``volcano.sh/node-vgpu-register`` value for the advertised GPUs (docs/protocol.md §2.1).

    ``gpus`` are the non-filtered GPUs; records are sorted by NVML minor; unhealthy GPUs are kept
    with ``false``.  None when there is no GPU to register.
    """
    if not gpus:
        return None
    health = health or {}
    return register_records(
        (
            g.minor,
            RegisterRecord(
                uuid=g.uuid,
                count=cfg.split_count,
                devmem=register_devmem(g.memory_total_mib * 1048576, cfg.gpu_memory_factor),
                type=register_type(g.name),
                health=bool(health.get(g.uuid, True)),
                mode=cfg.operating_mode,
            ),
        )
        for g in gpus
    )


_UNSET: Any = object()


@dataclass(frozen=True)
class WritePlan:
    """One patch: ``register`` (``_UNSET`` = leave alone, None = delete) and/or ``handshake``."""

    register: Any = _UNSET
    handshake: bool = False
    reason: str = ""
    seq: int = 0
    """The observation count when the plan was made: later observations are not answered by it."""

    @property
    def writes_register(self) -> bool:
        return self.register is not _UNSET

    def annotations(self, reported: str) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        if self.writes_register:
            out[keys.REGISTER] = self.register
        if self.handshake:
            out[keys.HANDSHAKE] = reported
        return out


def _is_stamp(value: str | None) -> bool:
    return value is not None and (REQUESTING in value or DELETED in value)


class RegistrarPolicy:
    """What to write and when; no I/O, time passed in (seconds of a monotonic clock)."""

    def __init__(self, mode: HandshakeMode, register: str | None):
        self.mode = mode
        self.desired_register = register
        self.seen_node = False  # we know the Node's current annotations
        self.observed_register: str | None = None
        self.observed_handshake: str | None = None
        self.started = False  # the startup write is done
        self.last_register_write = -math.inf
        self.last_handshake_write = -math.inf
        self.t_obs: float | None = None  # when the stamp we must answer was observed
        self.reply_at: float | None = None
        self.key_missing = False
        self.retry_at = -math.inf  # after a failed write, nothing before this
        self.failures = 0
        self.seq = 0  # observations so far
        self.stamp_seq = 0  # the latest observation of a new stamp …
        self.stamp_t = 0.0  # … and when it was made
        self.missing_seq = 0  # the observation that found the key missing

    # ---------------------------------------------------------------- inputs

    def set_register(self, value: str | None) -> None:
        self.desired_register = value

    def observe(self, annotations: Mapping[str, str] | None, t: float) -> None:
        """The Node as the watch (or a PATCH response) shows it, at time ``t``."""
        ann = annotations or {}
        hs = ann.get(keys.HANDSHAKE)
        self.seq += 1
        changed = hs != self.observed_handshake or not self.seen_node
        if changed and hs is None and self.started:
            self.key_missing = True
            self.missing_seq = self.seq
        elif changed and _is_stamp(hs) and self.mode is HandshakeMode.AUTO and self.started:
            self.stamp_seq, self.stamp_t = self.seq, t
            if self.reply_at is None:
                self.t_obs = t
                self.reply_at = t + REPLY_DELAY_S
        if hs is not None:
            self.key_missing = False
        self.observed_handshake = hs
        self.observed_register = ann.get(keys.REGISTER)
        self.seen_node = True

    def node_gone(self) -> None:
        self.seen_node = False

    # ---------------------------------------------------------------- decisions

    def _register_due_at(self) -> float | None:
        if self.observed_register == self.desired_register:
            return None
        return self.last_register_write + REGISTER_MIN_SPACING_S

    def _handshake_due_at(self) -> float | None:
        if self.mode is HandshakeMode.OFF:
            return None
        if not self.started:
            return -math.inf
        if self.mode is HandshakeMode.ON:
            return self.last_handshake_write + ON_MODE_PERIOD_S
        due = []
        if self.reply_at is not None:
            due.append(self.reply_at)
        if self.key_missing:
            due.append(self.last_handshake_write + HANDSHAKE_MIN_SPACING_S)
        return min(due) if due else None

    def next_deadline(self) -> float | None:
        """The earliest time something may become due (None: nothing until the Node changes)."""
        if not self.seen_node:
            return None
        times = [x for x in (self._register_due_at(), self._handshake_due_at()) if x is not None]
        if not times:
            return None
        return max(min(times), self.retry_at)

    def due(self, t: float) -> WritePlan | None:
        """The write to do now, or None."""
        if not self.seen_node or t < self.retry_at:
            return None
        hs_at = self._handshake_due_at()
        reg_at = self._register_due_at()
        hs = hs_at is not None and t >= hs_at
        if not self.started:
            # Startup: the handshake (auto/on) carries the register along, whatever its state;
            # in off mode only a register that differs is written.
            if self.mode is HandshakeMode.OFF:
                self.started = True
            else:
                return WritePlan(register=self.desired_register, handshake=True, reason="startup", seq=self.seq)
        reg = reg_at is not None and t >= reg_at
        s = self.seq
        if self.mode is HandshakeMode.ON and hs:
            return WritePlan(register=self.desired_register, handshake=True, reason="periodic (on)", seq=s)
        if hs:
            reason = "answer scheduler stamp" if self.reply_at is not None else "handshake key missing"
            # Combine with the register when it differs, even if its 5-s spacing is not over yet.
            if reg_at is not None:
                return WritePlan(register=self.desired_register, handshake=True, reason=reason + " + register", seq=s)
            return WritePlan(handshake=True, reason=reason, seq=s)
        if reg:
            return WritePlan(register=self.desired_register, reason="register differs", seq=s)
        return None

    # ---------------------------------------------------------------- outcomes

    def written(self, plan: WritePlan, t: float) -> None:
        if plan.writes_register:
            self.last_register_write = t
        if plan.handshake:
            self.last_handshake_write = t
            # Only what was observed before the plan was made is answered by this write; a stamp
            # the watch delivered while the PATCH was in flight still gets its own reply.
            if self.reply_at is not None:
                if self.stamp_seq <= plan.seq:
                    self.reply_at = None
                    self.t_obs = None
                else:  # a newer stamp arrived while the PATCH was in flight: answer it in turn
                    self.t_obs = self.stamp_t
                    self.reply_at = self.stamp_t + REPLY_DELAY_S
            if self.key_missing and self.missing_seq <= plan.seq:
                self.key_missing = False
        self.started = True
        self.failures = 0
        self.retry_at = -math.inf

    def failed(self, plan: WritePlan, t: float) -> None:
        self.failures += 1
        if self.mode is HandshakeMode.ON and plan.handshake:
            delay = ON_MODE_ERROR_RETRY_S
        else:
            delay = min(ERROR_BACKOFF_S[0] * 2 ** (self.failures - 1), ERROR_BACKOFF_S[1])
        if self.t_obs is not None and plan.handshake:
            lo, hi = self.t_obs + REPLY_WINDOW_S[0], self.t_obs + REPLY_WINDOW_S[1]
            # Stay inside the window while possible; past it, as soon as possible.
            nxt = t + delay
            if nxt > hi and t < hi:
                nxt = max(lo, min(hi, t + ERROR_BACKOFF_S[0]))
            delay = nxt - t
        self.retry_at = t + delay


@dataclass
class RegistrarStats:
    writes: int = 0
    register_writes: int = 0
    handshake_writes: int = 0
    failures: int = 0


class NodeRegistrar:
    """Keeps this Node's register annotation (and handshake) right; one background thread.

    ``start(loop=False)`` leaves the deciding to the caller's :meth:`tick` (tests with a
    fake clock); the node watch runs either way.
    """

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        register: str | None,
        mode: HandshakeMode = HandshakeMode.AUTO,
        *,
        clock: Clock | None = None,
    ):
        self.client = client
        self.node_name = node_name
        self.clock = clock or RealClock()
        self.policy = RegistrarPolicy(mode, register)
        self.stats = RegistrarStats()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._write_lock = threading.Lock()
        self._changes = 0  # bumped by every input, so the loop never misses a wake-up
        self.evaluated_at = -math.inf  # clock time of the loop's last decision …
        self._evaluated_changes = -1  # … and the inputs it had seen
        self.cache: WatchCache = node_cache(client, node_name, listener=self._on_node)

    @property
    def mode(self) -> HandshakeMode:
        return self.policy.mode

    # ---------------------------------------------------------------- inputs

    def set_register(self, value: str | None) -> None:
        """A new register value (e.g. after a health change); written if it differs from the Node's."""
        with self._cond:
            if value != self.policy.desired_register:
                log.info("register annotation changes to %s", value)
            self.policy.set_register(value)
            self._changes += 1
            self._cond.notify_all()

    def _on_node(self, kind: str, node: dict[str, Any]) -> None:
        if kind == "SYNC":
            node = self.cache.get(self.node_name) or {}
            if not node:
                with self._cond:
                    self.policy.node_gone()
                    self._changes += 1
                return
        with self._cond:
            if kind == "DELETED":
                self.policy.node_gone()
            else:
                self.policy.observe((node.get("metadata") or {}).get("annotations"), self.clock.monotonic())
            self._changes += 1
            self._cond.notify_all()

    # ---------------------------------------------------------------- lifecycle

    def start(self, loop: bool = True) -> NodeRegistrar:
        self._stop.clear()
        self.cache.start()
        if loop and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="vgpu-registrar", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._changes += 1
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        self.cache.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                seen = self._changes
                t = self.clock.monotonic()
            try:
                if self.tick():
                    continue
            except Exception:  # noqa: BLE001 - registration must never die
                log.exception("node registrar: unexpected error")
            with self._cond:
                self.evaluated_at = t
                self._evaluated_changes = seen
                self._cond.notify_all()
                if self._stop.is_set():
                    return
                if self._changes != seen:
                    continue  # something arrived while we were deciding: decide again, don't sleep
                deadline = self.policy.next_deadline()
                now = self.clock.monotonic()
                if deadline is None or deadline > now:
                    self.clock.wait(self._cond, None if deadline is None else deadline - now)

    def wait_idle(self, t: float, timeout: float) -> bool:
        """Wait until the loop has decided at clock time ``t`` or later with every input seen
        (tests with a fake clock)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.evaluated_at < t or self._evaluated_changes != self._changes:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    # ---------------------------------------------------------------- one step

    def tick(self) -> bool:
        """Do the write that is due now, if any; True when a write was attempted."""
        with self._write_lock:
            with self._cond:
                t = self.clock.monotonic()
                plan = self.policy.due(t)
                if plan is None:
                    return False
                reported = encode_reported(self.clock.now())
            annotations = plan.annotations(reported)
            try:
                node = self.client.patch_node_annotations(self.node_name, annotations)
            except KubeError as exc:
                with self._cond:
                    self.policy.failed(plan, self.clock.monotonic())
                    self.stats.failures += 1
                log.warning("node %s: %s write failed: %s", self.node_name, plan.reason, exc)
                return True
            with self._cond:
                self.policy.written(plan, t)
                self.stats.writes += 1
                self.stats.register_writes += int(plan.writes_register)
                self.stats.handshake_writes += int(plan.handshake)
            log.info("node %s: wrote %s (%s)", self.node_name, ", ".join(sorted(annotations)), plan.reason)
            self.cache.upsert(node)  # write-through: the policy sees our own value at once
            return True


def warn_renamed_resources(names: Iterable[tuple[str, str]]) -> list[str]:
    """docs/protocol.md §2.3: Volcano master looks for the default resource names in ``status.allocatable``."""
    out = []
    for configured, default in names:
        if configured != default:
            out.append(
                f"resource {configured!r} is not the default {default!r}: Volcano master (v1.16+) only "
                f"schedules onto nodes whose allocatable has {default} > 0, so it will ignore this node"
            )
    return out
