"""The `vgpu` command line.

Each subcommand lives in its own module of this package, which defines ``configure(parser)``
(its arguments, description and ``func``).  ``SUBCOMMANDS`` names them with the one line that
``vgpu --help`` shows, so listing them imports none: a module is imported only when argparse
dispatches to its subcommand.  `vgpu plugin` therefore loads the plugin and what it needs, never
the monitor or the demo's simulators (`vgpu.sim`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import __version__, logfmt


@dataclass(frozen=True)
class Subcommand:
    name: str
    module: str  # defines configure(parser: argparse.ArgumentParser)
    help: str  # the one line of `vgpu --help`


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("plugin", "vgpu.cli.plugin", "kubelet device plugin: vgpu-number, vgpu-memory and vgpu-cores"),
    Subcommand("monitor", "vgpu.cli.monitor", "Prometheus exporter on :9394 and the 5-second priority feedback loop"),
    Subcommand("inspect", "vgpu.cli.inspect", "decode annotations and HAMi-core shared-region files"),
    Subcommand("mig", "vgpu.cli.mig", "dynamic MIG helpers: knownMigGeometries from this node's GPUs (read-only)"),
    Subcommand(
        "demo", "vgpu.cli.demo", "the whole flow with fake GPUs: simulated cluster, real plugin and monitor processes"
    ),
)
_BY_NAME = {c.name: c for c in SUBCOMMANDS}
_CONFIGURED = "_vgpu_configured"  # set on a subparser once its module has configured it


def help_line(name: str) -> str:
    """The one-line help of subcommand ``name`` (also used by its module's own parser)."""
    return _BY_NAME[name].help


def configure_subcommand(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """Import subcommand ``name``'s module and let it fill ``parser`` (once)."""
    if not getattr(parser, _CONFIGURED, False):
        importlib.import_module(_BY_NAME[name].module).configure(parser)
        add_log_options(parser, after_command=True)
        setattr(parser, _CONFIGURED, True)
    return parser


def _level(text: str) -> str:
    try:
        return logfmt.parse_level(text)
    except logfmt.LogSettingError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None


def _format(text: str) -> str:
    try:
        return logfmt.parse_format(text)
    except logfmt.LogSettingError as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None


def add_log_options(parser: argparse.ArgumentParser, *, after_command: bool = False) -> None:
    """``--log-level``/``--log-format``, on ``vgpu`` and on every subcommand (before or after it).

    On a subcommand the default is SUPPRESS, so a value given before the subcommand survives.
    """
    default = argparse.SUPPRESS if after_command else None
    group = parser.add_argument_group("logging (before or after the subcommand)")
    group.add_argument(
        "--log-level",
        default=default,
        type=_level,
        metavar="LEVEL",
        help=f"{', '.join(logfmt.LEVELS[:4])} (any case) [env {logfmt.LEVEL_ENV}; default {logfmt.DEFAULT_LEVEL}]",
    )
    group.add_argument(
        "--log-format",
        default=default,
        type=_format,
        metavar="FORMAT",
        help="text, or json: one object per line with timestamp, level, logger, message and the "
        f"context fields {', '.join(logfmt.CONTEXT_FIELDS)} [env {logfmt.FORMAT_ENV}; default {logfmt.DEFAULT_FORMAT}]",
    )


class _LazySubcommands(argparse._SubParsersAction):
    """Subparsers that are configured when argparse dispatches to them, not when they are listed."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Sequence[Any] | str | None,
        option_string: str | None = None,
    ) -> None:
        name = values[0] if isinstance(values, list | tuple) and values else None
        if name in _BY_NAME and name in self._name_parser_map:
            configure_subcommand(self._name_parser_map[name], name)
        super().__call__(parser, namespace, values, option_string)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes under the Volcano scheduler: kubelet device plugin, "
        "HAMi-core limits, dynamic MIG, health checks and per-container metrics.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {__version__}")
    add_log_options(parser)
    parser.register("action", "parsers", _LazySubcommands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS:
        sub.add_parser(command.name, help=command.help)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        level, fmt = logfmt.resolve(args.log_level, args.log_format, os.environ)
    except logfmt.LogSettingError as exc:
        print(f"vgpu: {exc}", file=sys.stderr)
        return 2
    args.log_level, args.log_format = level, fmt
    logfmt.configure(level, fmt)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    return int(args.func(args) or 0)
