"""Metric names referenced by a PromQL expression or a Grafana ``label_values(...)`` query.

Enough PromQL for dashboards: string literals and label matchers (``{...}``) are dropped, as are
range/subquery brackets (``[5m]``, ``[$__rate_interval]``) and the label lists of ``by``,
``without``, ``on``, ``ignoring``, ``group_left`` and ``group_right``.  What remains is a
metric name when it is an identifier that is not a keyword and not followed by ``(`` (a
function or aggregation).
"""

from __future__ import annotations

import re

KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "and",
    "or",
    "unless",
    "inf",
    "nan",
    "atan2",
}
_STRING = re.compile(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`')
_CLAUSE = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_VALUES = re.compile(r"^\s*label_values\s*\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$", re.S)


def _drop_bracketed(text: str, open_: str, close: str) -> str:
    out, depth = [], 0
    for ch in text:
        if ch == open_:
            depth += 1
        elif ch == close and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def metric_names(expr: str) -> set[str]:
    m = _LABEL_VALUES.match(expr)
    if m:
        return metric_names(m.group(1))
    text = _STRING.sub('""', expr)
    text = _drop_bracketed(text, "{", "}")
    text = _drop_bracketed(text, "[", "]")
    text = _CLAUSE.sub(" ", text)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # Grafana variables outside brackets
    names = set()
    for match in _IDENT.finditer(text):
        word = match.group(0)
        rest = text[match.end() :].lstrip()
        if word.lower() in KEYWORDS or rest.startswith("("):
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # the unit of a number/duration such as 1e3 or 5m
        names.add(word)
    return names
