"""The region reader under AddressSanitizer and UBSan, over mutated region files.

``make sanitize`` (``python -m tests.unit.hamicore.sanitize``) and ``test_region_sanitize.py``
(short mode) both come here: build ``native/fuzz/region_fuzz.c`` together with
``native/region.c`` with ``-fsanitize=address,undefined``, write the seeds (the real HAMi-core
files of tests/fixtures/hami-core and writer-made files of every layout, one of them with every
seqlock stuck odd), and run the driver, which mutates them and calls every entry point of the
reader (docs/testing.md).  Any sanitizer report or broken invariant fails the run.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shlex
import subprocess
import sys
from dataclasses import dataclass

from tests.unit.hamicore import scenario

REPO = scenario.REPO_ROOT
SOURCES = (REPO / "native" / "region.c", REPO / "native" / "fuzz" / "region_fuzz.c")
FLAGS = (
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",  # UB aborts instead of printing and going on
    "-fno-omit-frame-pointer",
    "-g",
    "-O1",
    "-std=gnu11",
    "-Wall",
    "-Wextra",
    "-Werror",
)
SANITIZER_ENV = {
    "ASAN_OPTIONS": "abort_on_error=1:detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


@dataclass(frozen=True)
class Run:
    returncode: int
    output: str  # stdout and stderr together
    mutations: int  # as the driver reported; -1 when it did not get that far


def build(out_dir: pathlib.Path) -> pathlib.Path:
    """Compile the driver with the sanitizers; a compiler without them fails here, saying so."""
    out_dir.mkdir(parents=True, exist_ok=True)
    exe = out_dir / "region_fuzz"
    cmd = [
        *shlex.split(os.environ.get("CC", "cc")),
        *FLAGS,
        f"-I{REPO / 'native'}",
        *map(str, SOURCES),
        "-o",
        str(exe),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"building the sanitized region driver failed ({shlex.join(cmd)}):\n{proc.stderr}\n"
            "The ASan/UBSan runtimes come with gcc (Debian: libasan8, libubsan1); .ci/run installs them."
        )
    return exe


def write_seeds(seed_dir: pathlib.Path) -> list[pathlib.Path]:
    """Real HAMi-core files, then one writer-made file per layout and a never-settling one."""
    seed_dir.mkdir(parents=True, exist_ok=True)
    seeds = list(scenario.fixture_paths(seed_dir).values())
    seeds += [scenario.standard_region(seed_dir / f"{v}.cache", v) for v in scenario.VARIANTS]
    seeds.append(scenario.stuck_seqlock_region(seed_dir / "stuck.cache"))
    return seeds


def run(
    exe: pathlib.Path,
    seeds: list[pathlib.Path],
    work_dir: pathlib.Path,
    *,
    iterations: int,
    seconds: int,
    seed: int = 1,
    timeout: float | None = None,
) -> Run:
    work_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(exe), "-n", str(iterations), "-t", str(seconds), "-s", str(seed), "-d", str(work_dir), *map(str, seeds)]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env={**os.environ, **SANITIZER_ENV},
        timeout=timeout if timeout is not None else seconds + 60,
    )
    output = proc.stdout + proc.stderr
    mutations = -1
    for line in proc.stdout.splitlines():
        if line.startswith("region_fuzz: ") and " mutations " in line:
            mutations = int(line.split()[1])
    return Run(proc.returncode, output, mutations)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=20_000)
    ap.add_argument("--seconds", type=int, default=60, help="stop after this long even if not done")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=pathlib.Path, default=REPO / "build" / "sanitize")
    args = ap.parse_args(argv)
    exe = build(args.out)
    seeds = write_seeds(args.out / "seeds")
    result = run(exe, seeds, args.out / "work", iterations=args.iterations, seconds=args.seconds, seed=args.seed)
    sys.stdout.write(result.output)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
