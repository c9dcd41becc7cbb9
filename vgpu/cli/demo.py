"""`vgpu demo`: options (docs/configuration.md §5.3), signals and exit status.  The flow is :mod:`vgpu.sim.demo.flow`.

Imported only for `vgpu demo`, so it may import the simulators (`vgpu.sim`) at the top.

Ctrl-C (SIGINT) or SIGTERM: the first one ends the run cleanly (children get SIGTERM, sockets
and the temp dir are removed, the summary is printed); a second one kills the children at once.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from types import FrameType

from vgpu.sim.demo.flow import Demo
from vgpu.sim.demo.options import (
    DEFAULT_POLICY,
    DEFAULT_VERSION,
    GPU_MODELS,
    MODES,
    POLICIES,
    DemoConfigError,
    build_options,
)
from vgpu.sim.demo.render import Printer
from vgpu.sim.demo.report import EXIT_INTERRUPTED, EXIT_USAGE
from vgpu.sim.scheduler.versions import VERSIONS

EPILOG = """\
default nodes: gpu-node-1 = 2 x A100-SXM4-80GB (hami-core), gpu-node-2 = 1 x A30 (mig).
--gpus/--mode give one node instead; --nodes FILE any set (JSON, see vgpu/sim/demo/options.py).
GPU models: {models}.
exit status: 0 all checks passed, 1 a component failed, 2 bad options, 3 a check failed,
130 interrupted before a --duration run finished (without --duration Ctrl-C ends normally).
"""


def configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Start a fake NVML, a simulated API server, a fake kubelet, the Volcano scheduler "
        "emulator and the real `vgpu plugin` and `vgpu monitor` processes; schedule and admit the sample pods "
        "of deploy/examples, run their containers' HAMi-core shared regions, scrape /metrics, show the feedback "
        "loop, a MIG allocation and an XID health event. Prints every annotation, response and metric."
    )
    p.epilog = EPILOG.format(models=", ".join(GPU_MODELS))
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument(
        "--volcano-version",
        default=DEFAULT_VERSION,
        metavar="VERSION",
        help=f"Volcano scheduler to emulate: {', '.join(VERSIONS)} (default {DEFAULT_VERSION})",
    )
    p.add_argument(
        "--policy",
        default=DEFAULT_POLICY,
        choices=POLICIES,
        help=f"deviceshare.SchedulePolicy (default {DEFAULT_POLICY}: sharing is visible)",
    )
    p.add_argument(
        "--gpus",
        default=None,
        metavar="MODEL:N[,MODEL:N]",
        help="one node with these GPUs, e.g. A100-80GB:2 (default: the two nodes below)",
    )
    p.add_argument("--mode", default=None, choices=MODES, help="operating mode of that one node (default hami-core)")
    p.add_argument("--nodes", default=None, metavar="FILE", help="JSON file describing the simulated nodes")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        metavar="N",
        help="run at least N seconds and until the scripted flow is done, print the summary, stop "
        "and exit (default: run until Ctrl-C)",
    )
    p.add_argument(
        "--json", action="store_true", help="write the full report as JSON to stdout (the event log goes to stderr)"
    )
    p.add_argument(
        "--device-list-strategy",
        default="envvar",
        metavar="STRATEGY[,STRATEGY]",
        help="the plugins' device-list strategy: envvar, volume-mounts, cdi-annotations, cdi-cri or a comma "
        "list; with a CDI one each node gets a CDI spec and the runtime's resolution is shown (default envvar)",
    )
    p.add_argument("--examples", default=None, metavar="DIR", help="sample pod YAMLs (default deploy/examples)")
    p.add_argument(
        "--color",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="colour the output (default: only on a terminal, never with NO_COLOR)",
    )
    p.set_defaults(func=main)


def _quiet_libraries() -> None:
    """The demo prints what matters itself; library INFO lines would only interleave with it."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in ("vgpu", "kubernetes", "urllib3"):
            logging.getLogger(name).setLevel(logging.WARNING)


def main(args: argparse.Namespace) -> int:
    try:
        options = build_options(
            volcano_version=args.volcano_version,
            policy=args.policy,
            gpus=args.gpus,
            mode=args.mode,
            nodes_file=args.nodes,
            duration=args.duration,
            json_output=args.json,
            examples_dir=args.examples,
            color=args.color,
            device_list_strategy=args.device_list_strategy,
        )
    except DemoConfigError as exc:
        print(f"vgpu demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _quiet_libraries()
    printer = Printer(sys.stderr if options.json else sys.stdout, color=options.color)
    demo = Demo(options, printer)
    signals = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in signals}

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if demo.phase == "teardown" or demo.stop_requested:
            demo.force_stop = True  # a second signal: no more grace for the children
            if demo.cluster is not None:
                for node in demo.cluster.nodes:
                    for child in node.children:
                        child.kill_now()
            return
        demo.stop_requested = True
        if demo.phase == "setup":
            raise KeyboardInterrupt  # interrupt a blocking start-up step; run() tears down

    for s in signals:
        signal.signal(s, on_signal)
    try:
        return demo.run()
    except DemoConfigError as exc:
        print(f"vgpu demo: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before anything was started
        return EXIT_INTERRUPTED
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
