"""Scraping a monitor's ``/metrics`` and picking out per-pod values.

The text format is parsed here, line by line, rather than with ``prometheus_client``'s parser:
that one renames counter samples to ``<name>_total``, and the demo must show the legacy counter
``Device_memory_desc_of_container`` exactly as the monitor serves it (docs/metrics.md §1).
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from dataclasses import dataclass

SCRAPE_TIMEOUT_S = 5.0
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?\d+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class ExpositionError(ValueError):
    """A line of the exposition that is not a valid sample (names the line)."""


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float
    line: str = ""  # as served

    @property
    def label_map(self) -> dict[str, str]:
        return dict(self.labels)

    @property
    def pod(self) -> str | None:
        """``namespace/name`` for a container-family sample, else None."""
        lm = self.label_map
        if "podname" in lm:
            return f"{lm.get('podnamespace', '')}/{lm['podname']}"
        if "pod" in lm and "namespace" in lm:
            return f"{lm['namespace']}/{lm['pod']}"
        return None

    @property
    def container(self) -> str | None:
        lm = self.label_map
        return lm.get("ctrname") or lm.get("container")

    def text(self) -> str:
        return self.line

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "labels": dict(self.labels), "value": self.value, "line": self.line}


def parse_exposition(text: str) -> list[Sample]:
    """Samples of a text-format 0.0.4 exposition, names and label values exactly as served."""
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ExpositionError(f"line {n}: not a sample: {line[:120]!r}")
        labels: list[tuple[str, str]] = []
        body = m.group(2) or ""
        pos = 0
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            if lm is None:
                raise ExpositionError(f"line {n}: bad labels: {body[:120]!r}")
            value = re.sub(r'\\[\\"n]', lambda e: _UNESCAPE[e.group(0)], lm.group(2))
            labels.append((lm.group(1), value))
            pos = lm.end()
        try:
            number = float(m.group(3))
        except ValueError:
            raise ExpositionError(f"line {n}: bad value {m.group(3)!r}") from None
        out.append(Sample(m.group(1), tuple(labels), number, line))
    return out


def scrape(url: str, timeout: float = SCRAPE_TIMEOUT_S) -> list[Sample]:
    """GET ``url`` and parse it; raises ``OSError`` on HTTP/connection errors or a malformed body."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            text = resp.read().decode("utf-8")
    except urllib.error.URLError as exc:
        raise OSError(f"scrape of {url} failed: {exc.reason}") from None
    try:
        return parse_exposition(text)
    except ExpositionError as exc:
        raise OSError(f"scrape of {url}: {exc}") from None


def per_pod(samples: list[Sample], family: str = "vGPU_device_memory_usage_in_bytes") -> dict[str, float]:
    """``namespace/name`` → Σ of ``family`` over that pod's containers and devices."""
    out: dict[str, float] = {}
    for s in samples:
        if s.name == family and s.pod is not None:
            out[s.pod] = out.get(s.pod, 0.0) + s.value
    return out


def pod_samples(samples: list[Sample], pods: set[str]) -> list[Sample]:
    return [s for s in samples if s.pod in pods]


def host_samples(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if s.pod is None and not s.name.startswith(("vgpu_monitor_", "python_", "process_"))]
