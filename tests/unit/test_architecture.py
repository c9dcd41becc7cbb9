"""The import rules of the package layout, checked statically (ast; no module is imported or run).

Rules (README "Layout"):

* **pure layers** — ``vgpu.protocol`` and ``vgpu.config`` do no I/O: they import none of the
  I/O-doing packages and modules in ``IO_IMPORTS``, and call none of ``IO_CALLS``;
* **no stand-ins or tests in production** — nothing under ``vgpu/`` except ``vgpu/sim/`` and
  ``vgpu/cli/demo.py`` imports ``vgpu.sim`` or ``tests``; ``benchmarks/`` does not import ``tests``;
* **daemons apart** — ``vgpu.plugin`` and ``vgpu.monitor`` do not import each other;
* **nothing below the plugin imports it** — ``vgpu.kube``, ``vgpu.mig``, ``vgpu.nvml``,
  ``vgpu.hamicore``, ``vgpu.monitor``, ``vgpu.protocol`` and ``vgpu.config`` never import
  ``vgpu.plugin``.

An import is every ``import``/``from ... import`` statement anywhere in a module (function-local
and ``TYPE_CHECKING`` ones included: both are dependencies), relative ones resolved, plus
``importlib.import_module("...")`` / ``__import__("...")`` with a literal name.  Each violation is
reported on its own line as ``path:line: module imports X`` (or ``calls X``) with the rule it breaks.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PURE_LAYERS = ("vgpu.protocol", "vgpu.config")
# Packages whose whole point is I/O (our own adapters, RPC, the API client, the OS's network and processes).
IO_IMPORTS = (
    "vgpu.kube",
    "vgpu.nvml",
    "vgpu.plugin",
    "vgpu.monitor",
    "vgpu.mig",
    "vgpu.hamicore",
    "grpc",
    "kubernetes",
    "socket",
    "subprocess",
    "urllib",
    "http",
)
# Calls that read or write files: the builtin ``open(...)``; any ``X.open(...)`` (``os.open``,
# ``io.open``, ``Path.open``, ``gzip.open``, ...); ``os.fdopen``; and pathlib's whole-file helpers.
IO_CALLS = ("open()", "X.open()", "os.fdopen()", ".read_text()", ".read_bytes()", ".write_text()", ".write_bytes()")
_PATH_IO_METHODS = frozenset({"read_text", "read_bytes", "write_text", "write_bytes"})

STAND_INS = ("vgpu.sim", "tests")
# Where stand-ins belong: the simulator itself and `vgpu demo`, which runs everything against them.
STAND_IN_HOMES = ("vgpu.sim", "vgpu.cli.demo")

DAEMONS = ("vgpu.plugin", "vgpu.monitor")
BELOW_PLUGIN = ("vgpu.kube", "vgpu.mig", "vgpu.nvml", "vgpu.hamicore", "vgpu.monitor", "vgpu.protocol", "vgpu.config")


@dataclass(frozen=True)
class Module:
    name: str  # dotted: vgpu.config.loader
    path: str  # as shown in messages: vgpu/config/loader.py
    source: str

    @property
    def is_package(self) -> bool:
        return self.path.endswith("__init__.py")


@dataclass(frozen=True)
class Violation:
    module: Module
    line: int
    what: str  # "imports vgpu.plugin.podmatch" / "calls os.open()"
    rule: str

    def __str__(self) -> str:
        return f"{self.module.path}:{self.line}: {self.module.name} {self.what} ({self.rule})"


def within(name: str, prefixes: Iterable[str]) -> bool:
    """``name`` is one of ``prefixes`` or a submodule of one."""
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _resolve(module: Module, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.name.split(".")
    base = parts if module.is_package else parts[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _is_dynamic_import(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    return (isinstance(f, ast.Name) and f.id == "__import__") or (
        isinstance(f, ast.Attribute) and f.attr == "import_module"
    )


_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


def imports(module: Module, tree: ast.AST) -> Iterator[tuple[int, list[str]]]:
    """(line, candidate names) per import; ``from a import b`` gives [a, a.b] (b may be a module).

    A module that imports by computed name (``importlib.import_module(name)``, as the command
    table of the CLI does) is taken to import every dotted module name it spells as a string.
    """
    nodes = list(ast.walk(tree))
    computed = any(_is_dynamic_import(n) and not (n.args and isinstance(n.args[0], ast.Constant)) for n in nodes)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, [alias.name]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, node.level, node.module)
            yield node.lineno, [base] + [f"{base}.{a.name}" if base else a.name for a in node.names if a.name != "*"]
        elif _is_dynamic_import(node) and node.args and isinstance(node.args[0], ast.Constant):
            if isinstance(node.args[0].value, str):
                yield node.lineno, [node.args[0].value]
        elif computed and isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _DOTTED_NAME.fullmatch(node.value):
                yield node.lineno, [node.value]


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return f"{_dotted(node.func)}(...)"
    return "<expr>"


def io_calls(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, "calls X()") for every call in ``IO_CALLS``."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id == "open":
            yield node.lineno, "calls open()"
        elif isinstance(f, ast.Attribute) and (f.attr in ("open", "fdopen") or f.attr in _PATH_IO_METHODS):
            yield node.lineno, f"calls {_dotted(f)}()"


def forbidden_imports(module: Module, tree: ast.AST, banned: tuple[str, ...], rule: str) -> list[Violation]:
    out = []
    for line, names in imports(module, tree):
        hit = next((n for n in names if within(n, banned)), None)
        if hit is not None:
            out.append(Violation(module, line, f"imports {hit}", rule))
    return out


def check(module: Module) -> list[Violation]:
    """Every rule that applies to ``module``."""
    tree = ast.parse(module.source, module.path)
    name = module.name
    out: list[Violation] = []
    if within(name, PURE_LAYERS):
        rule = "vgpu.protocol and vgpu.config do no I/O"
        out += forbidden_imports(module, tree, IO_IMPORTS, rule)
        out += [Violation(module, line, what, rule) for line, what in io_calls(tree)]
    if within(name, ("vgpu",)) and not within(name, STAND_IN_HOMES):
        out += forbidden_imports(module, tree, STAND_INS, "production code imports no stand-in (vgpu.sim) or tests")
    if within(name, ("benchmarks",)):
        out += forbidden_imports(module, tree, ("tests",), "benchmarks do not import tests")
    for daemon in DAEMONS:
        other = tuple(d for d in DAEMONS if d != daemon)
        if within(name, (daemon,)):
            out += forbidden_imports(module, tree, other, "the two daemons do not import each other")
    if within(name, BELOW_PLUGIN):  # monitor -> plugin breaks this rule and the one above
        out += forbidden_imports(module, tree, ("vgpu.plugin",), "nothing below the plugin imports vgpu.plugin")
    return out


def modules(*tops: str) -> list[Module]:
    out = []
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT)
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out.append(Module(".".join(parts), rel.as_posix(), path.read_text(encoding="utf-8")))
    return out


ALL_MODULES = modules("vgpu", "benchmarks")
RULES = {
    "pure": "vgpu.protocol and vgpu.config do no I/O",
    "stand-ins": "production code imports no stand-in (vgpu.sim) or tests",
    "benchmarks": "benchmarks do not import tests",
    "daemons": "the two daemons do not import each other",
    "below-plugin": "nothing below the plugin imports vgpu.plugin",
}


def _violations(rule: str) -> list[Violation]:
    return [v for m in ALL_MODULES for v in check(m) if RULES[rule] in v.rule]


@pytest.mark.parametrize("rule", sorted(RULES))
def test_import_rule_holds(rule):
    found = _violations(rule)
    if found:
        pytest.fail(
            f"{len(found)} violation(s) of '{RULES[rule]}':\n" + "\n".join(f"  {v}" for v in found), pytrace=False
        )


def test_every_module_was_read():
    names = {m.name for m in ALL_MODULES}
    assert {"vgpu.protocol.keys", "vgpu.config.model", "vgpu.plugin", "vgpu.monitor", "benchmarks.run"} <= names
    assert len(ALL_MODULES) > 100


# ------------------------------------------------------------------ self-tests: each rule fires


def _check(name: str, source: str) -> list[str]:
    path = name.replace(".", "/") + ".py"
    return [str(v) for v in check(Module(name, path, source))]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import socket\n", "imports socket"),
        ("from urllib.request import urlopen\n", "imports urllib.request"),
        ("import http.client\n", "imports http.client"),
        ("import subprocess as sp\n", "imports subprocess"),
        ("from kubernetes import client\n", "imports kubernetes"),
        ("import grpc\n", "imports grpc"),
        ("from vgpu.hamicore.region import Region\n", "imports vgpu.hamicore.region"),
        ("from vgpu import nvml\n", "imports vgpu.nvml"),
        ("def f():\n    from vgpu.kube import client\n", "imports vgpu.kube"),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from vgpu.mig import plan\n", "imports vgpu.mig"),
        ("from .. import monitor\n", "imports vgpu.monitor"),
        ("import importlib\nm = importlib.import_module('vgpu.plugin.allocate')\n", "imports vgpu.plugin.allocate"),
        ("def f(p):\n    return open(p).read()\n", "calls open()"),
        ("import os\nfd = os.open('x', os.O_RDONLY)\n", "calls os.open()"),
        ("import os\nf = os.fdopen(3)\n", "calls os.fdopen()"),
        ("def f(path):\n    return path.read_text()\n", "calls path.read_text()"),
        ("from pathlib import Path\nPath('x').write_bytes(b'')\n", "calls Path(...).write_bytes()"),
        ("def f(p):\n    with p.open() as fh:\n        return fh\n", "calls p.open()"),
    ],
)
def test_pure_layer_rule_fires(source, what):
    for name in ("vgpu.config.somewhere", "vgpu.protocol.somewhere"):
        found = _check(name, source)
        assert any(what in v and RULES["pure"] in v for v in found), (name, found)


def test_pure_layer_rule_allows_pure_code():
    source = (
        "import json, re, os\nfrom dataclasses import dataclass\nfrom vgpu.protocol import keys\n"
        "from . import model\ndef f(text):\n    return json.loads(text), os.fspath('x'), text.splitlines()\n"
    )
    assert _check("vgpu.config.somewhere", source) == []


def test_stand_in_rule_fires_in_production_and_not_in_the_simulator_or_demo():
    source = "from vgpu.sim.apiserver import ApiServer\nimport tests.support.processes\n"
    found = _check("vgpu.plugin.daemon", source)
    assert [v.split(": ", 1)[1] for v in found] == [
        f"vgpu.plugin.daemon imports vgpu.sim.apiserver ({RULES['stand-ins']})",
        f"vgpu.plugin.daemon imports tests.support.processes ({RULES['stand-ins']})",
    ]
    assert found[0].startswith("vgpu/plugin/daemon.py:1: ")
    assert _check("vgpu.cli", "from vgpu import sim\n") == [
        f"vgpu/cli.py:1: vgpu.cli imports vgpu.sim ({RULES['stand-ins']})"
    ]
    table = (
        "import importlib\nCOMMANDS = ['vgpu.plugin.command',\n 'vgpu.sim.demo_command']\n"
        "def load(name):\n    return importlib.import_module(name)\n"
    )
    assert _check("vgpu.cli", table) == [
        f"vgpu/cli.py:3: vgpu.cli imports vgpu.sim.demo_command ({RULES['stand-ins']})"
    ]
    assert _check("vgpu.cli", table.replace("importlib.import_module(name)", "name")) == []
    assert _check("vgpu.cli.demo", source) == []
    assert _check("vgpu.sim.demo.cluster", source) == []


def test_benchmark_rule_fires():
    found = _check("benchmarks.test_x", "from tests.integration.monitor.process import MonitorProcess\n")
    assert found == [
        f"benchmarks/test_x.py:1: benchmarks.test_x imports tests.integration.monitor.process ({RULES['benchmarks']})"
    ]
    assert _check("benchmarks.test_x", "from benchmarks.gates import assert_gates\nimport vgpu.sim\n") == []


def test_daemon_rule_fires_both_ways():
    assert any(RULES["daemons"] in v for v in _check("vgpu.plugin.daemon", "from vgpu.monitor import core\n"))
    both = _check("vgpu.monitor.pods", "from vgpu.plugin.podmatch import pod_view\n")
    assert [v.rsplit(" (", 1)[1] for v in both] == [RULES["daemons"] + ")", RULES["below-plugin"] + ")"], both
    assert _check("vgpu.plugin.daemon", "from vgpu.plugin import server\nfrom vgpu.kube import client\n") == []


@pytest.mark.parametrize(
    "layer", ["vgpu.kube.x", "vgpu.mig.x", "vgpu.nvml.x", "vgpu.hamicore.x", "vgpu.protocol.x", "vgpu.config.x"]
)
def test_below_plugin_rule_fires(layer):
    found = _check(layer, "def f():\n    from vgpu.plugin import podmatch\n")
    assert any(RULES["below-plugin"] in v and "imports vgpu.plugin" in v for v in found), found


def test_relative_imports_are_resolved():
    m = Module("vgpu.mig.allocation", "vgpu/mig/allocation.py", "")
    assert _resolve(m, 1, "plan") == "vgpu.mig.plan"
    assert _resolve(m, 2, "plugin") == "vgpu.plugin"
    pkg = Module("vgpu.mig", "vgpu/mig/__init__.py", "")
    assert _resolve(pkg, 1, "plan") == "vgpu.mig.plan"
    assert _resolve(pkg, 2, None) == "vgpu"
    found = _check("vgpu.mig.allocation", "from ..plugin.podmatch import PodView\n")
    assert any("imports vgpu.plugin.podmatch" in v for v in found), found
