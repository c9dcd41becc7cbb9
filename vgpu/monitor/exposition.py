"""Prometheus text format 0.0.4, rendered without prometheus_client's counter renaming.

Why our own renderer (docs/metrics.md §1): ``prometheus_client.generate_latest`` writes every
counter family as ``<name>_total``, but the legacy family ``Device_memory_desc_of_container`` must
keep its exact name with ``# TYPE … counter``.  And a scrape of 100 containers renders ~2,600
samples: building a ``Sample`` with a label dict per value and formatting the labels again costs
~2 µs per sample, pre-rendered label text ~0.3 µs (the per-container budget is 50 µs).

So our collectors are ordinary prometheus_client collectors (``collect()`` yields ``Metric``
objects, registries and ``get_sample_value`` work), but the families they yield are
:class:`RenderedFamily`: their samples are kept as ready exposition lines, and ``samples`` is
parsed back from those lines only when somebody asks for it.  :func:`render` writes a
``RenderedFamily`` verbatim and any other ``Metric`` (e.g. prometheus_client's own process
collector) through prometheus_client's renderer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample


def escape_label_value(value: str) -> str:
    """Escape ``\\``, ``"`` and newline, as the text format requires (docs/metrics.md §1)."""
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def label_text(pairs: Iterable[tuple[str, str]]) -> str:
    """``k1="v1",k2="v2"`` (no braces), values escaped."""
    return ",".join(f'{k}="{escape_label_value(v)}"' for k, v in pairs)


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


class RenderedFamily(Metric):
    """A metric family whose samples are exposition lines (``name{labels} value\\n``).

    ``lines`` is filled by the collector; ``samples`` parses them back on demand, so generic
    prometheus_client consumers still see ordinary ``Sample`` tuples.
    """

    def __init__(self, name: str, documentation: str, typ: str):
        super().__init__(name, documentation, typ)
        self.lines: list[str] = []

    @property
    def samples(self) -> list[Any]:
        return [parse_sample_line(line) for line in self.lines]

    @samples.setter
    def samples(self, value: list[Any]) -> None:
        if value:
            raise AttributeError("RenderedFamily keeps its samples as lines; append to .lines")

    def header(self) -> str:
        return f"# HELP {self.name} {escape_help(self.documentation)}\n# TYPE {self.name} {self.type}\n"


_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)\n?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')
_UNESCAPE = re.compile(r"\\(.)")


def parse_sample_line(line: str) -> Sample:
    """One ``name{labels} value`` line back into a ``Sample`` (exact name: no ``_total`` games).

    prometheus_client's own text parser appends ``_total`` to counter samples, which would
    misname ``Device_memory_desc_of_container``.
    """
    m = _LINE.match(line)
    if m is None:
        raise ValueError(f"not an exposition sample line: {line!r}")
    labels = {
        k: _UNESCAPE.sub(lambda e: "\n" if e.group(1) == "n" else e.group(1), v)
        for k, v in _LABEL.findall(m.group(2) or "")
    }
    return Sample(m.group(1), labels, float(m.group(3)), None, None)


class _One:
    """A one-family collector, to render a foreign ``Metric`` through prometheus_client."""

    def __init__(self, metric: Metric):
        self._metric = metric

    def collect(self) -> Iterable[Metric]:
        return (self._metric,)


def render(families: Iterable[Metric]) -> bytes:
    """The text exposition of ``families``; families without samples are omitted entirely."""
    out: list[str] = []
    for family in families:
        if isinstance(family, RenderedFamily):
            if family.lines:
                out.append(family.header())
                out.extend(family.lines)
        elif family.samples:
            out.append(generate_latest(_One(family)).decode("utf-8"))
    return "".join(out).encode("utf-8")
