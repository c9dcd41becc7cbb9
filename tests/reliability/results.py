"""The suite's own measurements: one row per fault, merged into ``build/reliability/results.json``.

Every fault test calls :func:`record` with what it measured.  The Reliability table of
``docs/reliability.md`` is generated from that file (``make reliability-readme``,
:mod:`tests.reliability.readme`), so its numbers are the numbers of a real run, never typed by hand.
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from dataclasses import asdict, dataclass

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = pathlib.Path(os.environ.get("VGPU_RELIABILITY_RESULTS", ROOT / "build" / "reliability" / "results.json"))


@dataclass(frozen=True)
class FaultResult:
    """``recovery_s``: seconds from the fault clearing to the first proof of recovery (None: no recovery
    is involved, e.g. a clean exit); ``bound_s``: the bound the test asserts."""

    fault: str
    behaviour: str
    recovery_s: float | None
    bound_s: float | None
    order: int = 0


def record(
    key: str, fault: str, behaviour: str, recovery_s: float | None, bound_s: float | None, order: int = 0
) -> FaultResult:
    """Merge one row (keyed by ``key``) into the results file, written atomically."""
    row = FaultResult(fault, behaviour, None if recovery_s is None else round(recovery_s, 2), bound_s, order)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    try:
        data = json.loads(RESULTS.read_text())
    except (FileNotFoundError, ValueError):
        data = {}
    data.setdefault("rows", {})[key] = asdict(row)
    data["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tmp = RESULTS.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, RESULTS)
    return row


class Stopwatch:
    """Monotonic seconds since construction (or since :meth:`restart`)."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def restart(self) -> None:
        self.t0 = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0


def poll(predicate, timeout: float, what: str, interval: float = 0.02):
    """Poll ``predicate`` until it returns a truthy value (returned) or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(interval)
