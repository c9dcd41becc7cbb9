"""The declared gates (``benchmarks/gates.toml``) and the results one benchmark run records.

Thresholds live in one declarative file so that a reader sees every promise the suite keeps
in one place, and a benchmark cannot quietly lower its own bar.  Each gate evaluation during
a run becomes a :class:`GateResult`; ``benchmarks/conftest.py`` writes them into the
pytest-benchmark JSON (key ``"gates"``), from which ``benchmarks/summary.py`` renders the
Markdown table.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GATES_FILE = Path(__file__).with_name("gates.toml")
KINDS = ("ratio", "max")


class GateFileError(ValueError):
    """``gates.toml`` is malformed; the message names the file, the gate and the key."""


@dataclass(frozen=True)
class Gate:
    id: str
    kind: str  # "ratio": baseline/ours >= threshold; "max": value <= threshold
    threshold: float
    unit: str  # "x" for ratios
    measures: str
    source: str

    def passes(self, value: float) -> bool:
        if math.isnan(value):
            return False
        return value >= self.threshold if self.kind == "ratio" else value <= self.threshold

    @property
    def threshold_text(self) -> str:
        return f"≥ {self.threshold:g}×" if self.kind == "ratio" else f"≤ {self.threshold:g} {self.unit}"


@dataclass
class GateResult:
    """One evaluation of one gate in one run (what the summary table shows)."""

    id: str
    kind: str
    measures: str
    threshold: float
    unit: str
    value: float  # the ratio, or the measured value in ``unit``
    passed: bool
    ours_median_s: float | None = None
    baseline_median_s: float | None = None
    test: str = ""
    quick: bool = False
    declared: bool = True  # False: an inline ``minimum=`` not (yet) in gates.toml
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_gates(path: Path = GATES_FILE) -> dict[str, Gate]:
    """Parse and check the gates file; a malformed entry is a :class:`GateFileError`."""
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GateFileError(f"{path}: {exc}") from None
    unknown = set(raw) - {"gate"}
    if unknown:
        raise GateFileError(f"{path}: unknown top-level key(s) {sorted(unknown)}; only [[gate]] tables")
    gates: dict[str, Gate] = {}
    for n, entry in enumerate(raw.get("gate", []), 1):
        where = f"{path}: gate #{n} ({entry.get('id', 'no id')!s})"
        gid = entry.get("id")
        if not isinstance(gid, str) or not gid:
            raise GateFileError(f"{where}: 'id' must be a non-empty string")
        if gid in gates:
            raise GateFileError(f"{where}: duplicate id {gid!r}")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise GateFileError(f"{where}: 'kind' must be one of {KINDS}, got {kind!r}")
        key = "min" if kind == "ratio" else "max"
        other = "max" if kind == "ratio" else "min"
        threshold = entry.get(key)
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not threshold > 0
            or math.isinf(threshold)
        ):
            raise GateFileError(f"{where}: a {kind} gate needs a positive number '{key}', got {threshold!r}")
        if other in entry:
            raise GateFileError(f"{where}: a {kind} gate takes '{key}', not '{other}'")
        unit = entry.get("unit", "x" if kind == "ratio" else None)
        if not isinstance(unit, str) or not unit:
            raise GateFileError(f'{where}: a max gate needs a \'unit\' (e.g. "MB", "ms")')
        measures, source = entry.get("measures"), entry.get("source", "")
        if not isinstance(measures, str) or not measures.strip():
            raise GateFileError(f"{where}: 'measures' must say what the gate measures")
        if not isinstance(source, str):
            raise GateFileError(f"{where}: 'source' must be a string")
        extra = set(entry) - {"id", "kind", "min", "max", "unit", "measures", "source"}
        if extra:
            raise GateFileError(f"{where}: unknown key(s) {sorted(extra)}")
        gates[gid] = Gate(gid, kind, float(threshold), unit, measures.strip(), source)
    if not gates:
        raise GateFileError(f"{path}: no [[gate]] entries")
    return gates
