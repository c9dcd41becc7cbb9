"""Text → plain data for both config files, with syntax errors in the docs/configuration.md §2.3 format.

YAML is read with PyYAML's safe loader, i.e. YAML 1.1 scalars as the Go `yaml.v2` based readers
of the scheduler and upstream plugin see them (``yes``/``on`` are booleans there too), plus one
addition: exponent floats without a dot (``1e3``), which Go reads as numbers.  Duplicate keys
keep the last value (as Go does) and produce a warning.  JSON rejects ``NaN``/``Infinity`` (not
JSON; Go rejects them) and also warns about duplicate keys.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable
from typing import Any

import yaml

from vgpu.config.model import ConfigError


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


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def parse_yaml(text: str, source: str) -> tuple[object, list[str]]:
    """Parse one YAML document; returns (data, warnings).  Syntax errors raise `ConfigError`."""
    loader = _Loader(text)
    try:
        data = loader.get_single_data()
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

    if not text.strip():
        raise ConfigError(source, "(root)", "file is empty; it must be a JSON object", show_value=False)
    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            source, f"line {exc.lineno}, column {exc.colno}", f"not valid JSON: {exc.msg}", show_value=False
        ) from None
    except (ValueError, RecursionError) as exc:
        raise ConfigError(source, "(file)", f"not valid JSON: {exc}", show_value=False) from None
    return data, [f"{source}: {message}" for message in duplicates]
