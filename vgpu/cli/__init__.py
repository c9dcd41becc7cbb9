"""The `vgpu` command line.

Subcommands are registered by the modules that implement them; each one adds
its own parser through a ``register(subparsers)`` function listed in ``_COMMANDS``.
"""
from __future__ import annotations

import argparse
import importlib
import logging
import sys

from vgpu import __version__

# module path -> registers one subcommand (`register(subparsers)`); each sets `func`.
_COMMANDS: list[str] = ["vgpu.cli.plugin", "vgpu.cli.monitor", "vgpu.cli.inspect", "vgpu.cli.demo"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vgpu",
        description="GPU sharing for Kubernetes under the Volcano scheduler: kubelet device plugin, "
        "HAMi-core limits, dynamic MIG, health checks and per-container metrics.",
    )
    parser.add_argument("--version", action="version", version=f"vgpu {__version__}")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="logging verbosity (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _COMMANDS:
        importlib.import_module(module).register(sub)
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


if __name__ == "__main__":
    sys.exit(main())
