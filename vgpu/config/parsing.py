"""Text → plain data for both config files, with syntax errors in the docs/configuration.md §2.3 format.

YAML is read with PyYAML's safe loader, i.e. YAML 1.1 scalars as the Go `yaml.v2` based readers
of the scheduler and upstream plugin see them (``yes``/``on`` are booleans there too), plus one
addition: exponent floats without a dot (``1e3``), which Go reads as numbers.  Duplicate keys
keep the last value (as Go does) and produce a warning.  JSON rejects ``NaN``/``Infinity`` (not
JSON; Go rejects them) and also warns about duplicate keys.

Bounded work whatever the text (docs/configuration.md §2.4; the limits are
:mod:`vgpu.config.limits`): at most 1 MiB of text; YAML anchors and aliases are allowed (an
operator may share one MIG layout between models), but the document is composed first and its
size *with every alias expanded* counted on the node graph — a recursive alias or more than
``MAX_YAML_NODES`` expanded nodes is refused before anything is constructed, so a 1.3 KB
"billion laughs" file is refused in milliseconds.  A number longer than ``MAX_NUMBER_CHARS`` is
never given to ``int()``/``float()``: it becomes an :class:`~vgpu.config.model.OversizedNumber`,
which the validator refuses naming the key.  Error messages quote at most a short excerpt.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from typing import Any

import yaml

from vgpu.config.limits import MAX_CONFIG_BYTES, MAX_NUMBER_CHARS, MAX_YAML_NODES
from vgpu.config.model import ConfigError, OversizedNumber


class _Loader(yaml.SafeLoader):
    """Safe loader that records duplicate mapping keys instead of silently dropping them."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[object, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
                    continue
                line = key_node.start_mark.line + 1
                ident = (key_node.tag, key_node.value)
                if ident in seen:
                    self.duplicates.append(
                        f'line {line}: duplicate key "{key_node.value}" (first on line {seen[ident]}); '
                        "the last value is used"
                    )
                else:
                    seen[ident] = line
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_int(self, node: yaml.ScalarNode) -> int | OversizedNumber:
        """YAML ints, but more than ``MAX_NUMBER_CHARS`` characters are never given to ``int()``."""
        text = str(node.value)
        if len(text) > MAX_NUMBER_CHARS:
            return OversizedNumber(text[:20], len(text))
        return self.construct_yaml_int(node)

    def construct_bounded_float(self, node: yaml.ScalarNode) -> float | OversizedNumber:
        text = str(node.value)
        if len(text) > MAX_NUMBER_CHARS:
            return OversizedNumber(text[:20], len(text))
        return self.construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_bounded_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _Loader.construct_bounded_float)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _check_size(text: str, source: str) -> None:
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(
            source, "(file)", f"is larger than {MAX_CONFIG_BYTES} bytes (the most a ConfigMap holds)", show_value=False
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root: yaml.Node, source: str) -> None:
    """Refuse a document whose alias-expanded size exceeds ``MAX_YAML_NODES``, or a recursive one.

    Aliases make the composed graph a DAG (or a cycle) whose expanded size can be exponential in
    the text; this counts it in time linear in the graph (each node's expanded size once,
    memoised), iteratively (no recursion limit), and stops at the first count over the limit.
    """
    sizes: dict[int, int] = {}
    active = {id(root)}
    stack: list[tuple[yaml.Node, list[yaml.Node], int]] = [(root, _children(root), 0)]
    totals = [1]
    while stack:
        node, children, at = stack[-1]
        if at == len(children):
            stack.pop()
            active.discard(id(node))
            size = totals.pop()
            sizes[id(node)] = size
            if totals:
                totals[-1] += size
            if not totals or totals[-1] <= MAX_YAML_NODES:
                continue
        else:
            stack[-1] = (node, children, at + 1)
            child = children[at]
            known = sizes.get(id(child))
            if known is None:
                if id(child) in active:
                    mark = child.start_mark
                    raise ConfigError(
                        source,
                        f"line {mark.line + 1}, column {mark.column + 1}",
                        "not accepted: a recursive YAML alias (a node that contains itself)",
                        show_value=False,
                    )
                active.add(id(child))
                stack.append((child, _children(child), 0))
                totals.append(1)
                continue
            totals[-1] += known
            if totals[-1] <= MAX_YAML_NODES:
                continue
        raise ConfigError(
            source,
            "(file)",
            f"not accepted: more than {MAX_YAML_NODES} YAML nodes with its aliases expanded "
            "(each use of an alias counts its whole anchored value)",
            show_value=False,
        )


def parse_yaml(text: str, source: str) -> tuple[object, list[str]]:
    """Parse one YAML document; returns (data, warnings).  Syntax errors raise `ConfigError`."""
    _check_size(text, source)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            data: object = None
        else:
            _check_expansion(node, source)
            data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        reason = ": ".join(part for part in (exc.context, exc.problem) if part)
        raise ConfigError(source, where, f"not valid YAML: {reason}", show_value=False) from None
    except yaml.YAMLError as exc:
        raise ConfigError(source, "(file)", f"not valid YAML: {exc}", show_value=False) from None
    except RecursionError:
        raise ConfigError(source, "(file)", "not valid YAML: nested too deeply", show_value=False) from None
    finally:
        loader.dispose()
    return data, [f"{source}: {message}" for message in loader.duplicates]


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _json_int(text: str) -> int | OversizedNumber:
    return OversizedNumber(text[:20], len(text)) if len(text) > MAX_NUMBER_CHARS else int(text)


def _json_float(text: str) -> float | OversizedNumber:
    return OversizedNumber(text[:20], len(text)) if len(text) > MAX_NUMBER_CHARS else float(text)


def parse_json(text: str, source: str) -> tuple[object, list[str]]:
    """Parse a JSON document; returns (data, warnings).  Syntax errors raise `ConfigError`."""
    duplicates: list[str] = []

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        result: dict[str, object] = {}
        for key, value in items:
            if key in result:
                duplicates.append(f'duplicate key "{key}"; the last value is used')
            result[key] = value
        return result

    _check_size(text, source)
    if not text.strip():
        raise ConfigError(source, "(root)", "file is empty; it must be a JSON object", show_value=False)
    try:
        data = json.loads(
            text, object_pairs_hook=pairs, parse_constant=_reject_constant, parse_int=_json_int, parse_float=_json_float
        )
    except json.JSONDecodeError as exc:
        raise ConfigError(
            source, f"line {exc.lineno}, column {exc.colno}", f"not valid JSON: {exc.msg}", show_value=False
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(source, "(file)", f"not valid JSON: {exc}", show_value=False) from None
    return data, [f"{source}: {message}" for message in duplicates]
