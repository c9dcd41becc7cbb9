"""Kubernetes field and label selectors: parse the query-string syntax and match objects.

The simulated API server filters LIST and WATCH with these, so the grammar follows the
real one (``k8s.io/apimachinery`` fields/labels packages) closely enough that a selector
the real server accepts is accepted here and a malformed one is rejected with a message
naming the offending term:

- field selectors: comma-separated ``key=value``, ``key==value``, ``key!=value``; a
  backslash escapes ``,``, ``=``, ``!`` and ``\\`` inside values;
- label selectors: equality (``a=b``, ``a==b``, ``a!=b``), set-based (``a in (x,y)``,
  ``a notin (x)``), existence (``a``, ``!a``) and the numeric ``a>1`` / ``a<1``.

Which field keys a resource supports is the caller's business (see ``resources``);
matching uses a ``getter(field_key) -> str`` so this module stays free of resource knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass


class SelectorError(ValueError):
    """A selector string that does not parse; the message names the bad term."""


# --------------------------------------------------------------------------------------
# Field selectors
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    key: str
    value: str
    negate: bool  # True for ``!=``

    def matches(self, getter: Callable[[str], str]) -> bool:
        return (getter(self.key) == self.value) != self.negate


@dataclass(frozen=True)
class FieldSelector:
    """A conjunction of field requirements; the empty selector matches everything."""

    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, getter: Callable[[str], str]) -> bool:
        return all(r.matches(getter) for r in self.requirements)

    def keys(self) -> set[str]:
        return {r.key for r in self.requirements}

    def exact(self, key: str) -> str | None:
        """The value ``key`` must equal, when the selector pins it (used for indexes)."""
        for r in self.requirements:
            if r.key == key and not r.negate:
                return r.value
        return None


def _split_unescaped(text: str, sep: str) -> list[str]:
    """Split on ``sep`` not preceded by a backslash escape; escapes are kept for later."""
    parts, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            cur.append(text[i : i + 2])
            i += 2
            continue
        if ch == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape_field_value(value: str, term: str) -> str:
    out, i = [], 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=!":
                raise SelectorError(f"invalid field selector {term!r}: invalid escape sequence in value")
            out.append(value[i + 1])
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector {term!r}: unescaped {ch!r} in value")
        out.append(ch)
        i += 1
    return "".join(out)


def _find_operator(term: str) -> tuple[int, str] | None:
    """Position and spelling of the first unescaped ``!=``, ``==`` or ``=`` in ``term``."""
    i = 0
    while i < len(term):
        ch = term[i]
        if ch == "\\":
            i += 2
            continue
        if term.startswith("!=", i):
            return i, "!="
        if term.startswith("==", i):
            return i, "=="
        if ch == "=":
            return i, "="
        i += 1
    return None


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parse a ``fieldSelector`` query value; raises SelectorError naming the bad term."""
    if not text or not text.strip():
        return FieldSelector()
    reqs = []
    for term in _split_unescaped(text, ","):
        if not term.strip():
            continue
        found = _find_operator(term)
        if found is None:
            raise SelectorError(f"invalid field selector {term!r}: expected KEY=VALUE, KEY==VALUE or KEY!=VALUE")
        pos, op = found
        key = term[:pos].strip()
        if not key:
            raise SelectorError(f"invalid field selector {term!r}: empty key")
        value = _unescape_field_value(term[pos + len(op) :], term)
        reqs.append(FieldRequirement(key, value, op == "!="))
    return FieldSelector(tuple(reqs))


# --------------------------------------------------------------------------------------
# Label selectors
# --------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def validate_label_key(key: str) -> str | None:
    """None when ``key`` is a valid label key, else the reason."""
    prefix, _, name = key.rpartition("/")
    if "/" in prefix:
        return "a qualified name must consist of an optional DNS prefix and a name, separated by '/'"
    if prefix and (len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        return "prefix part must be a lowercase RFC 1123 subdomain"
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (at most 63 characters)"
        )
    return None


def validate_label_value(value: str) -> str | None:
    """None when ``value`` is a valid label value, else the reason."""
    if value == "":
        return None
    if len(value) > 63 or not _NAME_RE.match(value):
        return (
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character (at most 63 characters)"
        )
    return None


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", ">", "<"
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if not present:
            return False
        assert value is not None  # present: labels map str to str
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.op == ">" else have < want


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; the empty selector matches everything."""

    requirements: tuple[LabelRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)


_TOKEN_RE = re.compile(r"\s*(!=|==|=|!|,|\(|\)|>|<|[^\s!=,()<>]+)")


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(text, pos)
        if not m:  # pragma: no cover - the pattern accepts every non-space character
            raise SelectorError(f"invalid label selector {text!r} at position {pos}")
        out.append(m.group(1))
        pos = m.end()
    return out


_OPERATORS = {"=", "==", "!=", "in", "notin", ">", "<"}


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse a ``labelSelector`` query value; raises SelectorError naming the bad term."""
    if not text or not text.strip():
        return LabelSelector()
    toks = _tokens(text)
    reqs: list[LabelRequirement] = []
    i = 0

    def fail(why: str) -> SelectorError:
        return SelectorError(f"unable to parse requirement in label selector {text!r}: {why}")

    def check_key(key: str) -> None:
        if key in _OPERATORS or key in {",", "(", ")", "!"}:
            raise fail(f"found {key!r}, expected a label key")
        why = validate_label_key(key)
        if why:
            raise fail(f"invalid label key {key!r}: {why}")

    def check_value(value: str) -> None:
        why = validate_label_value(value)
        if why:
            raise fail(f"invalid label value {value!r}: {why}")

    while i < len(toks):
        tok = toks[i]
        if tok == "!":
            if i + 1 >= len(toks):
                raise fail("'!' must be followed by a key")
            key = toks[i + 1]
            check_key(key)
            reqs.append(LabelRequirement(key, "!"))
            i += 2
        else:
            key = tok
            check_key(key)
            i += 1
            op = toks[i] if i < len(toks) else ","
            if op == ",":
                reqs.append(LabelRequirement(key, "exists"))
            elif op in ("=", "==", "!="):
                value = toks[i + 1] if i + 1 < len(toks) and toks[i + 1] not in {",", "(", ")"} else ""
                check_value(value)
                reqs.append(LabelRequirement(key, "!=" if op == "!=" else "=", (value,)))
                i += 2 if value else 1
            elif op in (">", "<"):
                if i + 1 >= len(toks):
                    raise fail(f"{op!r} needs an integer value")
                value = toks[i + 1]
                try:
                    int(value)
                except ValueError:
                    raise fail(f"for {op!r} operator, the value must be an integer, got {value!r}") from None
                reqs.append(LabelRequirement(key, op, (value,)))
                i += 2
            elif op in ("in", "notin"):
                if i + 1 >= len(toks) or toks[i + 1] != "(":
                    raise fail(f"found {toks[i + 1] if i + 1 < len(toks) else 'end of string'!r}, expected '('")
                i += 2
                values: list[str] = []
                expect_value = True
                while True:
                    if i >= len(toks):
                        raise fail("missing ')'")
                    t = toks[i]
                    i += 1
                    if t == ")":
                        if expect_value and values:
                            raise fail("trailing ',' in value set")
                        break
                    if t == ",":
                        if expect_value:
                            values.append("")
                        expect_value = True
                        continue
                    if not expect_value:
                        raise fail(f"expected ',' or ')' but got {t!r}")
                    check_value(t)
                    values.append(t)
                    expect_value = False
                if not values:
                    raise fail(f"for {op!r} operator, the value set must not be empty")
                reqs.append(LabelRequirement(key, op, tuple(values)))
            else:
                raise fail(f"found {op!r}, expected one of '=', '!=', 'in', 'notin', '>', '<' or ','")
        if i < len(toks):
            if toks[i] != ",":
                raise fail(f"found {toks[i]!r}, expected ','")
            i += 1
            if i >= len(toks):
                raise fail("trailing ','")
    return LabelSelector(tuple(reqs))
