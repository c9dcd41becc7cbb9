"""Read-only smoke test of the NVML layer against a real driver (or the fake one).

Run it on a GPU machine to check what the tests can only check against the fake library:
discovery through nvidia-ml-py, one native sample per device cross-checked against the same
reads through nvidia-ml-py, the cost of a sample on both paths, and the MIG state and profile
table of every MIG-capable GPU.

It only READS: it never changes MIG mode, never creates or destroys instances, never resets
a GPU (a test asserts that the mutating MIG calls appear nowhere in this module).

    python -m benchmarks.gpu_smoke [--nvml-library PATH] [--rounds N] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import pynvml

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


def run(library: str | None = None, rounds: int = 200) -> dict[str, Any]:
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
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nvml-library", help="libnvidia-ml.so.1 to load (default: VGPU_NVML_LIBRARY, then the system's)"
    )
    parser.add_argument("--rounds", type=int, default=200, help="timed rounds per path (default 200)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    try:
        report = run(args.nvml_library, args.rounds)
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
    for uuid, m in report["mig"].items():
        names = ", ".join(f"{p['name'] or p['id']}x{p['instances']}" for p in m.get("profiles", []))
        print(f"  MIG {uuid}: mode {m.get('mig_mode')} profiles: {names or m.get('error', 'none')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
