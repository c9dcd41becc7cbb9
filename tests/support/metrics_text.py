"""Reading a Prometheus text exposition in tests: one sample's value by name and labels."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


def samples(body: str) -> list[tuple[str, dict[str, str], float]]:
    """Every (name, labels, value) of ``body``."""
    return [(s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(body) for s in f.samples]


def value(body: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` whose labels include ``labels``; None when there is none."""
    found = [v for n, lab, v in samples(body) if n == name and all(lab.get(k) == x for k, x in labels.items())]
    assert len(found) <= 1, f"{name}{labels}: {len(found)} samples match"
    return found[0] if found else None
