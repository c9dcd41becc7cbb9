"""Read-only smoke test of the NVML layer against a real driver (or the fake one).

Run it on a GPU machine to check what the tests can only check against the fake library:
discovery through nvidia-ml-py, one native sample per device cross-checked against the same
reads through nvidia-ml-py, the cost of a sample on both paths, and the MIG state and profile
table of every MIG-capable GPU.  With the floor programs built (``make floors``; ``make gpu-smoke``
builds them) it also times the sampler against its C floor (benchmarks/floors/nvml_floor.c: the
same NVML calls, nothing else) on this library, and, in a child process, on the fake NVML with
8 GPUs x 16 processes, so the real-driver ratio is printed next to the fake's.

It only READS: it never changes MIG mode, never creates or destroys instances, never resets
a GPU (a test asserts that the mutating MIG calls appear nowhere in this module).

    python -m benchmarks.gpu_smoke [--nvml-library PATH] [--rounds N] [--json] [--no-fake]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pynvml

from benchmarks import floors
from benchmarks.baselines.pynvml_sampler import PynvmlSampler
from vgpu.nvml.discovery import discover_gpus
from vgpu.nvml.errors import NvmlError
from vgpu.nvml.library import init_pynvml, resolve_library
from vgpu.nvml.mig_calls import NVML_GPU_INSTANCE_PROFILE_COUNT, MigNvml
from vgpu.nvml.sampler import Sampler


def _median_us(fn: Callable[[], Any], n: int) -> float:
    fn()
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) * 1e6


def _interleaved_us(ours: Callable[[], Any], floor: Callable[[], Any], n: int) -> tuple[float, float]:
    ours()
    floor()
    a, b = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        ours()
        t1 = time.perf_counter()
        floor()
        t2 = time.perf_counter()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return statistics.median(a) * 1e6, statistics.median(b) * 1e6


def floor_report(library: str, sampler: Sampler, rounds: int) -> dict[str, Any]:
    """The sampler against its C floor on ``library`` (read-only NVML queries only)."""
    try:
        flib = floors.load()
    except (FileNotFoundError, OSError) as exc:
        return {"error": str(exc)}
    if flib.nvml_floor_open(library.encode()) < 0:
        return {"error": f"the floor could not open {library}"}
    into_us, floor_a = _interleaved_us(sampler.sample_into, flib.nvml_floor_sample, rounds)
    sample_us, floor_b = _interleaved_us(sampler.sample, flib.nvml_floor_sample, rounds)
    return {
        "floor_us": round(min(floor_a, floor_b), 1),
        "sample_into_us": round(into_us, 1),
        "sample_us": round(sample_us, 1),
        "sample_into_vs_floor": round(into_us / floor_a, 2),
        "sample_vs_floor": round(sample_us / floor_b, 2),
    }


def fake_floor_report(rounds: int) -> dict[str, Any]:
    """The same floor comparison on the fake NVML (8 GPUs x 16 processes), in a child process:
    one process cannot load two libraries named libnvidia-ml.so.1."""
    from vgpu.sim.nvml import fakenvml

    try:
        fakenvml.library_path(build=False)
    except FileNotFoundError as exc:
        return {"error": str(exc)}
    with tempfile.TemporaryDirectory(prefix="vgpu-smoke-") as tmp:
        devices = [
            fakenvml.device(i, processes=[{"pid": 1000 + 100 * i + k, "used_memory_mib": 256} for k in range(16)])
            for i in range(8)
        ]
        fake = fakenvml.FakeNvml.create(pathlib.Path(tmp), devices)
        out = subprocess.run(
            [sys.executable, "-m", "benchmarks.gpu_smoke", "--floor-only", "--json", "--rounds", str(rounds),
             "--nvml-library", str(fake.library)],
            env={**os.environ, **fake.env},
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    return dict(json.loads(out.stdout))


def _mig_report(mig: MigNvml, index: int) -> dict[str, Any]:
    """MIG mode and the GPU-instance profile table of one GPU (read-only calls only)."""
    dev = mig.device(index)
    try:
        current, pending = mig.get_mig_mode(dev)
    except NvmlError as exc:
        return {"mig_mode": None, "error": str(exc)}
    out: dict[str, Any] = {"mig_mode": {"current": current, "pending": pending}, "profiles": []}
    for constant in range(NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            info = mig.gpu_instance_profile_info(dev, constant)
        except NvmlError:
            continue  # NOT_SUPPORTED / INVALID_ARGUMENT: the constant is not offered by this GPU
        entry = {
            "constant": constant,
            "id": info.id,
            "name": info.name,
            "slices": info.slice_count,
            "instances": info.instance_count,
            "memory_mib": info.memory_size_mb,
        }
        try:
            entry["placements"] = [(p.start, p.size) for p in mig.gpu_instance_possible_placements(dev, info.id)]
        except NvmlError as exc:
            entry["placements_error"] = str(exc)
        out["profiles"].append(entry)
    return out


def run_floor_only(library: str | None, rounds: int) -> dict[str, Any]:
    lib = resolve_library(library)
    with Sampler(lib) as sampler:
        return {"library": lib, **floor_report(lib, sampler, rounds)}


def run(library: str | None = None, rounds: int = 200, *, compare_fake: bool = True) -> dict[str, Any]:
    """Collect the report; raises NvmlError when NVML cannot start at all."""
    lib = resolve_library(library)
    report: dict[str, Any] = {"library": lib}
    t0 = time.perf_counter()
    gpus = discover_gpus(lib)
    report["discovery_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
    report["gpus"] = [dataclasses.asdict(g) for g in gpus]
    init_pynvml(lib)
    try:
        report["driver_version"] = pynvml.nvmlSystemGetDriverVersion()
        with Sampler(lib) as sampler:
            baseline = PynvmlSampler()
            node, ref = sampler.sample(), baseline.sample()
            report["sample"] = [
                {
                    "index": d.index,
                    "memory_total_bytes": d.memory_total_bytes,
                    "memory_used_bytes": d.memory_used_bytes,
                    "utilization_gpu": d.utilization_gpu,
                    "utilization_memory": d.utilization_memory,
                    "processes": len(d.processes),
                    "rc": {
                        "memory": d.memory_rc,
                        "utilization": d.utilization_rc,
                        "processes": d.processes_rc,
                        "process_util": d.process_util_rc,
                    },
                    # memory total never changes: both paths must agree on it
                    "matches_pynvml_total": d.memory_total_bytes == r[0],
                }
                for d, r in zip(node.devices, ref, strict=False)
            ]
            into_us = _median_us(sampler.sample_into, rounds)
            objects_us = _median_us(sampler.sample, rounds)
            pynvml_us = _median_us(baseline.sample, rounds)
            report["floor"] = floor_report(lib, sampler, rounds)
        report["timing_us"] = {
            "cffi_sample_into": round(into_us, 1),
            "cffi_sample": round(objects_us, 1),
            "pynvml": round(pynvml_us, 1),
            "ratio_sample_into": round(pynvml_us / into_us, 2),
            "ratio_sample": round(pynvml_us / objects_us, 2),
            "rounds": rounds,
        }
    finally:
        pynvml.nvmlShutdown()
    mig = MigNvml(lib)
    try:
        report["mig"] = {g.uuid: _mig_report(mig, g.index) for g in gpus if g.mig_capable}
    finally:
        mig.close()
    if compare_fake:
        report["floor_fake"] = fake_floor_report(rounds)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nvml-library", help="libnvidia-ml.so.1 to load (default: VGPU_NVML_LIBRARY, then the system's)"
    )
    parser.add_argument("--rounds", type=int, default=200, help="timed rounds per path (default 200)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-fake", action="store_true", help="skip the floor comparison on the fake NVML")
    parser.add_argument("--floor-only", action="store_true", help=argparse.SUPPRESS)  # the fake's child run
    args = parser.parse_args(argv)
    try:
        if args.floor_only:
            json.dump(run_floor_only(args.nvml_library, args.rounds), sys.stdout)
            print()
            return 0
        report = run(args.nvml_library, args.rounds, compare_fake=not args.no_fake)
    except NvmlError as exc:
        print(f"vgpu smoke: NVML failed: {exc}", file=sys.stderr)
        return 1
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    t = report["timing_us"]
    print(
        f"library {report['library']}, driver {report['driver_version']}, "
        f"{len(report['gpus'])} GPU(s), discovery {report['discovery_ms']} ms"
    )
    for g, s in zip(report["gpus"], report["sample"], strict=False):
        print(
            f"  GPU {g['index']} {g['name']} {g['uuid']} minor {g['minor']} {g['memory_total_mib']} MiB "
            f"mig_capable={g['mig_capable']} mig_mode={g['mig_mode']} used={s['memory_used_bytes']} "
            f"rc={s['rc']} total_matches_pynvml={s['matches_pynvml_total']}"
        )
    print(
        f"one sample of all GPUs: cffi {t['cffi_sample_into']} us (dataclasses {t['cffi_sample']} us), "
        f"pynvml {t['pynvml']} us -> {t['ratio_sample_into']}x ({t['ratio_sample']}x)"
    )
    for what, f in (("this library", report["floor"]), ("fake NVML, 8 GPUs x 16 procs", report.get("floor_fake"))):
        if not f:
            continue
        if "error" in f:
            print(f"  floor ({what}): {f['error']}")
        else:
            print(
                f"  floor ({what}): {f['floor_us']} us; sample_into {f['sample_into_us']} us = "
                f"{f['sample_into_vs_floor']}x, sample {f['sample_us']} us = {f['sample_vs_floor']}x"
            )
    for uuid, m in report["mig"].items():
        names = ", ".join(f"{p['name'] or p['id']}x{p['instances']}" for p in m.get("profiles", []))
        print(f"  MIG {uuid}: mode {m.get('mig_mode')} profiles: {names or m.get('error', 'none')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
