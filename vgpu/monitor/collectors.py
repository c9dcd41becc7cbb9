"""prometheus_client collectors that build every family at scrape time (docs/metrics.md §2–§4).

- :class:`HostCollector`: the host GPU families from the last good NVML sample (bounded wait).
- :class:`ContainerCollector`: the per-container families; each tracked region is decoded once
  per scrape (one native call), mapped to its pod through the watch cache (a ``dict.get``, never
  an API call), and rendered through per-container label caches, so a scrape is
  O(#GPUs + #containers) with a small constant.
- :class:`SelfCollector`: ``vgpu_monitor_*`` self-metrics (no ``zone`` label: they describe the
  exporter, not a vGPU).

Pod mapping (docs/metrics.md §4.3): a directory whose pod is not (yet) known is still exported
with ``podnamespace=""``/``namespace=""`` and ``podname``/``pod`` = the pod UID (counted by
``vgpu_monitor_unmapped_containers``); a pod in phase Succeeded or Failed exports nothing.  A
known pod's container exports only the devices its ``vgpu-ids-new`` segment assigns it
(docs/metrics.md §5.1): a region's claim to any other GPU is never exported under that GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.registry import Collector

from vgpu import buildinfo
from vgpu.hamicore.region import RegionError, RegionErrorCode
from vgpu.monitor import families as F
from vgpu.monitor.discovery import REJECT_REASONS, Discovery
from vgpu.monitor.exposition import RenderedFamily, label_text
from vgpu.monitor.feedback import RECENT_KERNEL, UTILIZATION_SWITCH
from vgpu.monitor.host import HostSource
from vgpu.monitor.pods import PodLookup
from vgpu.monitor.stats import SCRAPE_BUCKETS, MonitorStats
from vgpu.nvml.errors import NVML_SUCCESS

_Z = f",{F.ZONE}}} "
_LABEL_CACHE_CAP = 64
LEGACY_UUID_LEN = 40  # legacy deviceuuid: the first 40 bytes of uuids[d] (docs/metrics.md §2)


# Label values every labelled self-metric shows from the start, at zero (docs/metrics.md §8).
READ_ERROR_REASONS = (*(c.name.lower() for c in RegionErrorCode), "torn")
FEEDBACK_FIELDS = (RECENT_KERNEL, UTILIZATION_SWITCH)


def _with_zeros(known: tuple[str, ...], counts: dict[str, int]) -> list[tuple[str, int]]:
    """``counts`` with every ``known`` key present (0 when absent), sorted by key."""
    return sorted({**dict.fromkeys(known, 0), **counts}.items())


def _families(defs: tuple[F.Family, ...]) -> list[RenderedFamily]:
    return [RenderedFamily(d.name, d.help, d.type) for d in defs]


class HostCollector(Collector):
    """``HostGPUMemoryUsage``, ``HostCoreUtilization`` and the ``hami_host_*`` families."""

    def __init__(self, source: HostSource, node_name: str, *, legacy: bool = True, hami: bool = True):
        self.source = source
        self.legacy = legacy
        self.hami = hami
        # Label text per host index, rendered once (identity is fixed at startup).
        self._legacy_labels = {
            g.index: label_text([("deviceidx", str(g.index)), ("deviceuuid", g.uuid)]) for g in source.gpus
        }
        self._hami_labels = {
            g.index: label_text(
                [
                    ("node", node_name),
                    ("device_index", str(g.index)),
                    ("device_uuid", g.uuid),
                    ("device_type", g.device_type),
                ]
            )
            for g in source.gpus
        }
        self._memctl_labels = {
            g.index: label_text(
                [("device_index", str(g.index)), ("device_uuid", g.uuid), ("device_type", g.device_type)]
            )
            for g in source.gpus
        }

    def collect(self) -> Iterator[RenderedFamily]:
        if not (self.legacy or self.hami):
            return
        sample = self.source.latest()
        if sample is None:
            return
        mem_l, util_l = _families(F.LEGACY_HOST)
        mem_h, util_h, ctl_h = _families(F.HAMI_HOST)
        for d in sample.devices:
            legacy = self._legacy_labels.get(d.index)
            if legacy is None:
                continue  # a device that appeared after startup has no known identity
            hami = self._hami_labels[d.index]
            if d.memory_rc == NVML_SUCCESS:
                v = f"{_Z}{d.memory_used_bytes}\n"
                mem_l.lines.append(f"HostGPUMemoryUsage{{{legacy}{v}")
                mem_h.lines.append(f"hami_host_gpu_memory_used_bytes{{{hami}{v}")
            if d.utilization_rc == NVML_SUCCESS:
                v = f"{_Z}{d.utilization_gpu}\n"
                util_l.lines.append(f"HostCoreUtilization{{{legacy}{v}")
                util_h.lines.append(f"hami_host_gpu_utilization_ratio{{{hami}{v}")
                ctl_h.lines.append(
                    f"hami_host_gpu_memory_controller_utilization_ratio{{"
                    f"{self._memctl_labels[d.index]}{_Z}{d.utilization_memory}\n"
                )
        if self.legacy:
            yield mem_l
            yield util_l
        if self.hami:
            yield mem_h
            yield util_h
            yield ctl_h


class ContainerCollector(Collector):
    """The legacy ``vGPU_*``/``Device_*`` and the ``hami_vgpu_*``/``hami_container_*`` families."""

    def __init__(
        self,
        discovery: Discovery,
        pods: PodLookup,
        stats: MonitorStats,
        *,
        legacy: bool = True,
        hami: bool = True,
        clock: Callable[[], float] = time.time,
    ):
        self.discovery = discovery
        self.pods = pods
        self.stats = stats
        self.legacy = legacy
        self.hami = hami
        self.clock = clock

    def collect(self) -> Iterator[RenderedFamily]:
        if not (self.legacy or self.hami):
            return
        now = int(self.clock())
        (usage, limit, desc, util, last) = L = _families(F.LEGACY_CONTAINER)
        (h_used, h_limit, h_mem, h_util, h_last, h_ctx, h_mod, h_buf) = H = _families(F.HAMI_CONTAINER)
        legacy, hami = self.legacy, self.hami
        unmapped = terminal = 0
        errors: dict[str, int] = {}
        get_pod = self.pods.get
        disc = self.discovery
        with disc.lock:
            for t in disc.tracked.values():
                pod = get_pod(t.pod_uid)
                allowed: frozenset[str] | None = None  # None: any device (the pod is unknown)
                if pod is None:
                    ident = ("", t.pod_uid, t.container)
                    unmapped += 1
                elif pod.terminal:
                    terminal += 1
                    continue  # plugin#130: its containers will not run again
                else:
                    allowed = pod.assigned_gpus(t.container)
                    if not allowed:
                        continue  # the pod gives this container no GPU: nothing of it is trusted
                    ident = (pod.namespace, pod.name, t.container)
                try:
                    snap = t.region.read()
                except RegionError as exc:
                    reason = exc.code.name.lower()
                    errors[reason] = errors.get(reason, 0) + 1
                    continue  # invalid for this scrape; the others keep reporting
                if snap.skipped_slots:  # torn: served the last consistent sums (docs/hami-core.md §8)
                    errors["torn"] = errors.get("torn", 0) + 1
                has_util = snap.has_util
                lkt = snap.last_kernel_time
                age = max(0, now - lkt) if lkt else None  # lkt None (no field) or 0 (never): not emitted
                cache = t.labels
                for dev in snap.devices:
                    if allowed is not None and dev.uuid not in allowed:
                        continue  # a GPU the container claims but was not given (counted by the feedback loop)
                    key = (ident, dev.vdevice_index, dev.uuid)
                    lab = cache.get(key)
                    if lab is None:
                        if len(cache) >= _LABEL_CACHE_CAP:
                            cache.clear()
                        lab = cache[key] = _container_labels(ident, dev.vdevice_index, dev.uuid)
                    leg, ham = lab
                    used = dev.used_bytes
                    if legacy:
                        usage.lines.append(f"vGPU_device_memory_usage_in_bytes{{{leg}{_Z}{used}\n")
                        limit.lines.append(f"vGPU_device_memory_limit_in_bytes{{{leg}{_Z}{dev.limit_bytes}\n")
                        desc.lines.append(
                            f'Device_memory_desc_of_container{{{leg},context="{dev.context_bytes}",'
                            f'module="{dev.module_bytes}",data="{dev.data_bytes}",offset="{dev.offset_bytes}"'
                            f"{_Z}{used}\n"
                        )
                        if has_util:
                            util.lines.append(f"Device_utilization_desc_of_container{{{leg}{_Z}{dev.sm_util}\n")
                        if age is not None:
                            last.lines.append(f"Device_last_kernel_of_container{{{leg}{_Z}{age}\n")
                    if hami:
                        h_used.lines.append(f"hami_vgpu_memory_used_bytes{{{ham}{_Z}{used}\n")
                        h_limit.lines.append(f"hami_vgpu_memory_limit_bytes{{{ham}{_Z}{dev.limit_bytes}\n")
                        h_mem.lines.append(f"hami_container_device_memory_bytes{{{ham}{_Z}{used}\n")
                        if has_util:
                            h_util.lines.append(f"hami_container_device_utilization_ratio{{{ham}{_Z}{dev.sm_util}\n")
                        if age is not None:
                            h_last.lines.append(f"hami_container_last_kernel_elapsed_seconds{{{ham}{_Z}{age}\n")
                        h_ctx.lines.append(f"hami_vgpu_memory_context_bytes{{{ham}{_Z}{dev.context_bytes}\n")
                        h_mod.lines.append(f"hami_vgpu_memory_module_bytes{{{ham}{_Z}{dev.module_bytes}\n")
                        h_buf.lines.append(f"hami_vgpu_memory_buffer_bytes{{{ham}{_Z}{dev.data_bytes}\n")
        with self.stats.lock:
            self.stats.unmapped_containers = unmapped
            self.stats.terminal_containers = terminal
            for reason, n in errors.items():
                self.stats.read_errors[reason] += n
        if legacy:
            yield from L
        if hami:
            yield from H


def _container_labels(ident: tuple[str, str, str], index: int, uuid: str) -> tuple[str, str]:
    """(legacy, HAMi) label text of one container device, label names from :mod:`families`."""
    d = str(index)
    return (
        label_text(zip(F.VGPU_MEMORY_USAGE.labels, (*ident, d, uuid[:LEGACY_UUID_LEN]), strict=True)),
        label_text(zip(F.HAMI_VGPU_MEMORY_USED.labels, (*ident, d, uuid), strict=True)),
    )


class SelfCollector(Collector):
    """``vgpu_monitor_*``: scrape duration, files tracked/rejected, NVML errors and value age."""

    def __init__(self, stats: MonitorStats, pods: PodLookup, host: HostSource | None):
        self.stats = stats
        self.pods = pods
        self.host = host

    def collect(self) -> Iterator[RenderedFamily]:
        s = self.stats
        out: list[RenderedFamily] = []

        def fam(
            name: str, help_: str, typ: str, rows: list[tuple[list[tuple[str, str]], Any]], sample: str | None = None
        ) -> None:
            f = RenderedFamily(name, help_, typ)
            sname = sample or name
            for labels, value in rows:
                lt = "{" + label_text(labels) + "}" if labels else ""
                f.lines.append(f"{sname}{lt} {_num(value)}\n")
            out.append(f)

        with s.lock:
            fam("vgpu_monitor_scrapes_total", "Scrapes of /metrics served", "counter", [([], s.scrapes)])
            h = RenderedFamily("vgpu_monitor_scrape_duration_seconds", "Time to build and render /metrics", "histogram")
            for bound, n in zip(SCRAPE_BUCKETS, s.scrape_bucket_counts, strict=True):
                h.lines.append(f'vgpu_monitor_scrape_duration_seconds_bucket{{le="{bound}"}} {n}\n')
            h.lines.append(f'vgpu_monitor_scrape_duration_seconds_bucket{{le="+Inf"}} {s.scrapes}\n')
            h.lines.append(f"vgpu_monitor_scrape_duration_seconds_sum {_num(s.scrape_seconds_sum)}\n")
            h.lines.append(f"vgpu_monitor_scrape_duration_seconds_count {s.scrapes}\n")
            out.append(h)
            fam(
                "vgpu_monitor_files_tracked",
                "Shared-region files currently tracked (one per container directory)",
                "gauge",
                [([], s.files_tracked)],
            )
            fam(
                "vgpu_monitor_files_initialising",
                "Region files whose creator has not set the magic yet",
                "gauge",
                [([], s.files_initialising)],
            )
            fam(
                "vgpu_monitor_container_directories",
                "<podUID>_<container> entries seen by the last scan",
                "gauge",
                [([], s.directories)],
            )
            fam(
                "vgpu_monitor_files_rejected",
                "Files or directories rejected by the last scan, by reason",
                "gauge",
                [([("reason", r)], n) for r, n in _with_zeros(REJECT_REASONS, s.rejected_now)],
            )
            fam(
                "vgpu_monitor_files_rejected_total",
                "Rejections first seen, by reason (each file once per reason)",
                "counter",
                [([("reason", r)], n) for r, n in _with_zeros(REJECT_REASONS, s.rejected_total)],
            )
            fam(
                "vgpu_monitor_region_read_errors_total",
                "Reads of tracked regions that failed, by reason",
                "counter",
                [([("reason", r)], n) for r, n in _with_zeros(READ_ERROR_REASONS, s.read_errors)],
            )
            fam(
                "vgpu_monitor_unmapped_containers",
                "Exported container directories whose pod is not in the pod cache (labelled by pod UID)",
                "gauge",
                [([], s.unmapped_containers)],
            )
            fam("vgpu_monitor_scans_total", "Discovery scans run", "counter", [([], s.scans)])
            fam(
                "vgpu_monitor_scan_failures_total",
                "Scans skipped because the containers root was unusable",
                "counter",
                [([], s.scan_failures)],
            )
            fam(
                "vgpu_monitor_last_scan_duration_seconds",
                "Duration of the last discovery scan",
                "gauge",
                [([], s.last_scan_seconds)],
            )
            fam(
                "vgpu_monitor_feedback_writes_total",
                "4-byte feedback writes into shared regions, by field",
                "counter",
                [([("field", k)], n) for k, n in _with_zeros(FEEDBACK_FIELDS, s.feedback_writes)],
            )
            fam(
                "vgpu_monitor_feedback_errors_total",
                "Feedback reads or writes that failed",
                "counter",
                [([], s.feedback_errors)],
            )
            fam(
                "vgpu_monitor_region_mismatches_total",
                "Containers whose region claims a GPU or a priority their pod does not give them, by reason",
                "counter",
                [([("reason", r)], n) for r, n in sorted(s.region_mismatches.items())],
            )
            fam("vgpu_monitor_gc_removed_total", "Stale container directories removed", "counter", [([], s.gc_removed)])
        fam(
            "vgpu_monitor_pod_cache_synced",
            "1 when the node's pod watch has listed all pods",
            "gauge",
            [([], 1 if self.pods.synced else 0)],
        )
        host = self.host
        fam(
            "vgpu_monitor_nvml_up",
            "1 when NVML is initialised (0 while the monitor waits for it, fail-on-init-error false)",
            "gauge",
            [([], 1 if host else 0)],
        )
        if host is not None:
            errors, age, stale = host.status()
            fam(
                "vgpu_monitor_nvml_errors_total",
                "NVML calls that failed, by device, call and return code (NOT_SUPPORTED is not a failure)",
                "counter",
                [([("device_index", i), ("call", c), ("code", code)], n) for (i, c, code), n in errors],
            )
            fam(
                "vgpu_monitor_nvml_unsupported",
                "1 when the device answered NOT_SUPPORTED for this value at the last sample (e.g. utilization on MIG)",
                "gauge",
                [([("device_index", i), ("call", c)], n) for (i, c), n in host.unsupported_now()],
            )
            fam(
                "vgpu_monitor_nvml_sample_age_seconds",
                "Age of the host GPU values served",
                "gauge",
                [] if age is None else [([], age)],
            )
            fam(
                "vgpu_monitor_nvml_stale_serves_total",
                "Scrapes that served older host values because NVML did not answer within the bound",
                "counter",
                [([], stale)],
            )
        yield from out


class BuildInfoCollector(Collector):
    """``vgpu_build_info``, labels from :mod:`vgpu.buildinfo` (docs/metrics.md §10.2), rendered once."""

    def __init__(self, labels: tuple[tuple[str, str], ...]):
        self._line = f"{buildinfo.NAME}{{{label_text(labels)}}} 1\n"

    def collect(self) -> Iterator[RenderedFamily]:
        f = RenderedFamily(buildinfo.NAME, buildinfo.HELP, "gauge")
        f.lines.append(self._line)
        yield f


def _num(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)
