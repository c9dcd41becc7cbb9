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
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from vgpu import __version__


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
        setattr(parser, _CONFIGURED, True)
    return parser


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
    parser.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="logging verbosity (default INFO)",
    )
    parser.register("action", "parsers", _LazySubcommands)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in SUBCOMMANDS:
        sub.add_parser(command.name, help=command.help)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 0 if args.command is None else 2
    return int(args.func(args) or 0)
