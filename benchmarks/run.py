"""``make bench`` / ``make bench-quick``: run the benchmarks, write the JSON and the summary, gate.

    python -m benchmarks.run [--quick] [--out DIR] [--require-all] -- [pytest args, e.g. benchmarks]

Runs pytest (pytest-benchmark) in a child process, writing ``DIR/results.json``; renders
``DIR/summary.md`` from it, even when a gate failed, so the table always shows what went
wrong; exits non-zero when pytest failed, when a gate failed, or (``--require-all``) when a
declared gate did not run.  ``--quick`` sets ``VGPU_BENCH_QUICK=1`` (fewer rounds, same gates).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from benchmarks.gates import load_gates
from benchmarks.summary import render


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, pytest_args = argv[:cut], argv[cut + 1 :]
    ap = argparse.ArgumentParser(prog="python -m benchmarks.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="CI mode: fewer rounds, same gates")
    ap.add_argument("--out", default="build/bench", help="directory for results.json and summary.md")
    ap.add_argument(
        "--require-all",
        action="store_true",
        help="fail unless every gate of benchmarks/gates.toml ran (and only declared ones)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results, summary_md = out / "results.json", out / "summary.md"
    for stale in (results, summary_md):
        stale.unlink(missing_ok=True)
    gates = load_gates()  # a malformed gates file fails here, before minutes of benchmarks

    env = dict(os.environ)
    if args.quick:
        env["VGPU_BENCH_QUICK"] = "1"
    else:
        env.pop("VGPU_BENCH_QUICK", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        f"--benchmark-json={results}",
        *(pytest_args or ["benchmarks"]),
    ]
    print("+", " ".join(cmd), flush=True)
    rc = subprocess.call(cmd, env=env)

    if not results.exists():
        print(f"benchmarks: pytest exited {rc} and wrote no {results}; no summary", file=sys.stderr)
        return rc or 1
    summary = render(json.loads(results.read_text()), gates, require_all=args.require_all)
    summary_md.write_text(summary.markdown)
    print(f"\n{summary.markdown}\nwrote {results} and {summary_md}")
    for p in summary.problems:
        print(f"GATE FAILURE: {p}", file=sys.stderr)
    if rc:
        print(f"benchmarks: pytest exited {rc}", file=sys.stderr)
        return rc
    return 0 if summary.ok else 1


if __name__ == "__main__":
    sys.exit(main())
