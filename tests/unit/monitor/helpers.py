"""Shared helpers for the monitor tests: container directories with realistic regions, pods, parsing."""

from __future__ import annotations

import os
import pathlib
import re
import time
from collections.abc import Callable
from typing import Any

from vgpu.sim.hamicore.scenario import (  # noqa: F401 - the monitor tests import them from here
    MIB,
    NOW,
    UUIDS,
    add_container,
    container_dir,
    write_region,
)
from vgpu.sim.pods import new_uid, pod  # noqa: F401 - the monitor tests import them from here

Samples = dict[str, list[tuple[dict[str, str], float]]]


def _parse_line(line: str) -> tuple[str, dict[str, str], float]:
    """A strict, character-level reader of one text-format sample line (independent of the code under test)."""
    i = 0
    while i < len(line) and line[i] not in "{ ":
        i += 1
    name, labels = line[:i], {}
    if i < len(line) and line[i] == "{":
        i += 1
        while line[i] != "}":
            eq = line.index("=", i)
            key = line[i:eq]
            assert line[eq + 1] == '"', line
            j, val = eq + 2, []
            while line[j] != '"':
                if line[j] == "\\":
                    j += 1
                    val.append({"n": "\n", "\\": "\\", '"': '"'}[line[j]])
                else:
                    val.append(line[j])
                j += 1
            assert key not in labels, f"duplicate label {key} in {line}"
            labels[key] = "".join(val)
            i = j + 1
            if line[i] == ",":
                i += 1
        i += 1
    assert line[i] == " ", line
    return name, labels, float(line[i + 1 :])


def parse(body: bytes | str) -> Samples:
    """sample name -> [(labels, value)] (parsed, not compared as text); each sample under a TYPE."""
    text = body.decode() if isinstance(body, bytes) else body
    out: Samples = {}
    typed: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
        if not line or line.startswith("#"):
            continue
        name, labels, value = _parse_line(line)
        assert any(name == t or name.startswith(t + "_") for t in typed), f"{name} has no TYPE line"
        out.setdefault(name, []).append((labels, value))
    return out


def headers(body: bytes | str) -> dict[str, tuple[str, str]]:
    """family name -> (TYPE, HELP) from the raw exposition."""
    text = body.decode() if isinstance(body, bytes) else body
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    return {name: (types[name], helps.get(name, "")) for name in types}


def one(samples: Samples, name: str, **labels: str) -> float:
    """The single sample of ``name`` whose labels include ``labels``."""
    hits = [v for lab, v in samples.get(name, []) if all(lab.get(k) == x for k, x in labels.items())]
    assert len(hits) == 1, f"{name}{labels}: {len(hits)} samples; have {samples.get(name)}"
    return hits[0]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns something truthy (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


def region_bytes(path: pathlib.Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def set_old(path: pathlib.Path | str, age_s: float, now: float | None = None) -> None:
    """Backdate an entry's own mtime (lstat) by ``age_s``."""
    t = (time.time() if now is None else now) - age_s
    os.utime(path, (t, t), follow_symlinks=False)
