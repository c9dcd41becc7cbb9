"""`vgpu demo`: the whole flow on one machine — fake GPUs, a simulated cluster, the real daemons.

The scripted flow (each step prints what it produced: every annotation, response and metric):

1. start the simulated API server, and per node the fake NVML, the fake kubelet and the REAL
   ``vgpu plugin`` and ``vgpu monitor`` processes (:mod:`vgpu.sim.demo.cluster`);
2. registration: the three ``Register`` calls the kubelet received, the ListAndWatch counts, the
   ``node-vgpu-register`` annotation, the handshake (Volcano ≤ v1.15), ``status.allocatable``;
3. the Volcano scheduler emulator (``--volcano-version``, ``--policy``) schedules the sample pods
   of ``deploy/examples/``: its annotations (``vgpu-ids-new``, ``devices-to-allocate``, …) or its
   reason for leaving a pod pending;
4. the kubelet admits each bound pod through the plugins (Allocate, GetPreferredAllocation): the
   env and mounts of every container, then the plugin's ``bind-phase``;
5. each HAMi-core container starts: a shared region is created where the mounts say, with usage
   that moves over time (:mod:`vgpu.sim.demo.workload`); a MIG pod gets a MIG instance;
6. ``/metrics`` of each monitor is scraped until every running pod has its own values, and the
   monitor's 5-second feedback loop shows up in the regions (priority blocking, SM limiter);
7. an XID on a GPU turns it unhealthy: ListAndWatch, the register annotation, allocatable.

Then, without ``--duration``, the tables stay live until Ctrl-C; with ``--duration N`` the demo
runs at least N seconds and until the scripted flow is done (each step has a timeout), prints
the summary and exits.  Exit status: 0 all checks passed; 1 a component failed; 3 a check
failed; 130 Ctrl-C before a ``--duration`` run finished (without ``--duration`` Ctrl-C is the
normal end: 0).  Everything it starts lives in one temp dir, removed at exit.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.plugin.api import HEALTHY
from vgpu.protocol import ProtocolError, decode_pod_devices, decode_register, keys
from vgpu.sim.cdi import CdiResolver
from vgpu.sim.cdi.container import describe, runtime_view
from vgpu.sim.demo.children import ComponentFailed
from vgpu.sim.demo.cluster import RESOURCES, DemoCluster, DemoNode
from vgpu.sim.demo.metrics import host_samples, per_pod, pod_samples, scrape
from vgpu.sim.demo.options import DemoOptions
from vgpu.sim.demo.pods import (
    ADMITTED,
    EXPECT_UNSCHEDULABLE,
    FAILED,
    PENDING,
    RUNNING,
    SCHEDULED,
    SKIPPED,
    UNSCHEDULABLE,
    Example,
    PodRecord,
    container_env,
    load_examples,
)
from vgpu.sim.demo.render import Printer
from vgpu.sim.demo.report import (
    DemoState,
    XidRecord,
    board_lines,
    checks,
    exit_code,
    report,
    summary_lines,
)
from vgpu.sim.demo.workload import Duty, HamiCoreContainer, MigContainer, host_cache_file
from vgpu.sim.kubelet.admission import ContainerResult
from vgpu.sim.nvml.cdi_spec import write_spec

log = logging.getLogger(__name__)

TICK_S = 0.2
STEP_S = 1.0  # workload updates
NVML_UPDATE_S = 2.0  # host usage into the fake NVML
SCRAPE_S = 2.0
BOARD_S = 1.0
FLOW_TIMEOUT_S = 120.0  # the scripted flow gives up after this long (its checks then fail)
UNSCHEDULABLE_AFTER_S = 5.0  # a pod expected to run counts as unschedulable after this long
XID = 79  # "GPU has fallen off the bus": not in the ignored set (docs/health.md)
HIGH_PRIORITY_DUTY = Duty(busy_s=20.0, idle_s=10.0)


class Demo:
    """One run.  ``stop_requested`` is polled by the loop (the command's signal handler sets it)."""

    def __init__(self, options: DemoOptions, printer: Printer, *, clock: Callable[[], float] = time.monotonic):
        self.options = options
        self.out = printer
        self.clock = clock
        self.state = DemoState(options)
        self.cluster: DemoCluster | None = None
        self.stop_requested = False
        self.force_stop = False
        self.phase = "setup"  # setup | loop | teardown (the signal handler acts on it)
        self._t0 = clock()
        if clock is time.monotonic:
            printer.start = self._t0  # event stamps in the log and in the JSON agree
        self._flow_t0 = 0.0
        self._pid = 100
        self._last: dict[str, float] = {}
        self._allocatable_shown: dict[str, dict[str, str]] = {}
        self._flow_done_at: float | None = None
        self._first_unschedulable: dict[str, float] = {}
        self._mig_metrics_shown: set[str] = set()

    # ------------------------------------------------------------------ output helpers

    def now(self) -> float:
        return self.clock() - self._t0

    def event(self, kind: str, text: str, details: list[str] | tuple[str, ...] = ()) -> None:
        self.state.events.append({"t": round(self.now(), 3), "kind": kind, "text": text, "details": list(details)})
        self.out.event(kind, text, details)

    def _due(self, name: str, every: float) -> bool:
        t = self.clock()
        if t - self._last.get(name, -math.inf) >= every:
            self._last[name] = t
            return True
        return False

    # ------------------------------------------------------------------ run

    def run(self) -> int:
        """The whole demo; always tears down.  Returns the exit status."""
        o = self.options
        examples = load_examples(o.examples_dir)
        self._header(examples)
        self.cluster = cluster = DemoCluster(o)
        self.state.workdir = str(cluster.workdir)
        try:
            self._startup(cluster)
            self._submit(cluster, examples)
            self.phase = "loop"
            self._loop(cluster)
        except ComponentFailed as exc:
            self.state.component_failed = True
            self.state.problems.append(str(exc))
            self.event("error", str(exc).splitlines()[0], str(exc).splitlines()[1:])
        except KeyboardInterrupt:
            self.state.interrupted = True
        except Exception as exc:  # a bug or an API error in the demo itself: still tear everything down
            log.debug("demo failed", exc_info=True)
            self.state.component_failed = True
            self.state.problems.append(f"the demo itself failed: {exc!r}")
            self.event("error", f"the demo itself failed: {exc!r}", traceback.format_exc().splitlines()[-8:])
        finally:
            self.phase = "teardown"
            self._teardown(cluster)
        results = checks(self.state)
        code = exit_code(self.state, results)
        self.out.lines(summary_lines(self.state, results, self.out))
        self.out.lines(["", f"  temp dir {self.state.workdir} removed; exit status {code}"])
        if o.json:
            sys.stdout.write(json.dumps(report(self.state, results, code), indent=1, default=str) + "\n")
            sys.stdout.flush()
        return code

    def _teardown(self, cluster: DemoCluster) -> None:
        self.state.elapsed = self.now()
        if self.state.interrupted:
            self.event("note", "interrupted: stopping every component")
        self._final_snapshot(cluster)
        if self.out.live:
            self.out.release_board()  # the last live tables stay on screen
        elif self.state.pods:
            self.out.board(board_lines(self.state, self.out))
        problems = cluster.close(force=self.force_stop)
        self.state.problems.extend(problems)
        for p in problems:
            self.out.event("error", p.splitlines()[0], p.splitlines()[1:])

    def _header(self, examples: list[Example]) -> None:
        o = self.options
        p = self.out.paint
        lines = [p(f"vgpu demo — Volcano {o.volcano_version}, policy {o.policy}, {len(o.nodes)} node(s)", "bold")]
        for n in o.nodes:
            models: dict[str, int] = {}
            for g in n.gpus:
                models[g.name] = models.get(g.name, 0) + 1
            lines.append(f"  {n.name:<12} {n.mode:<10} " + ", ".join(f"{c} × {m}" for m, c in models.items()))
        lines.append(f"  sample pods: {', '.join(e.path.name for e in examples)}")
        for note in o.notes:
            lines.append(p(f"  note: {note}", "yellow"))
        self.out.lines(lines)

    # ------------------------------------------------------------------ 1–2: startup and registration

    def _startup(self, cluster: DemoCluster) -> None:
        self.out.heading("1. Start: API server, fake NVML, fake kubelet, vgpu plugin + vgpu monitor per node")
        cluster.start()
        self.state.api_url = cluster.api.url
        self.event("api", f"simulated API server at {cluster.api.url} (kubeconfig {cluster.kubeconfig})")
        for node in cluster.nodes:
            self.event(
                "node",
                f"{node.name}: fake NVML {node.nvml.config_path} ({len(node.spec.gpus)} GPU(s)); "
                f"plugin pid {node.plugin.pid}, monitor pid {node.monitor.pid}",
                [
                    f"HOOK_PATH {node.hook_path}",
                    f"kubelet socket {node.kubelet.socket_path}",
                    f"config.json {json.dumps(json.loads(node.node_config.read_text()))}",
                ],
            )
        cluster.wait_ready()
        self.out.heading("2. Registration and handshake")
        for node in cluster.nodes:
            self._show_registration(node)
        sched = cluster.start_scheduler()
        self.event(
            "schedule",
            f"scheduler emulator: Volcano {self.options.volcano_version}, policy "
            f"{self.options.policy}; uses node(s) {', '.join(sorted(sched.core.nodes))}",
        )
        if cluster.scheduler_handshake:
            for node in cluster.nodes:
                hs = cluster.node_annotations(node.name).get(keys.HANDSHAKE, "")
                self.event(
                    "node", f"{node.name} annotation after the scheduler's node event", [f"{keys.HANDSHAKE}={hs}"]
                )
        for node in cluster.nodes:
            self.state.metrics_urls[node.name] = node.metrics_url
            self.event("metrics", f"{node.name}: vgpu monitor serves {node.metrics_url}")
        self._flow_t0 = self.clock()

    def _show_registration(self, node: DemoNode) -> None:
        regs = [r for r in node.kubelet.registrations if r.accepted]
        lines = []
        for r in regs:
            client = node.kubelet.plugin(r.resource_name)
            n = len(client.devices) if client else 0
            lines.append(
                f"Register {r.resource_name} version={r.version} endpoint={r.endpoint} "
                f"preferredAllocation={str(r.get_preferred_allocation_available).lower()} "
                f"→ ListAndWatch {n} devices"
            )
        self.event("kubelet", f"{node.name}: {len(regs)} device plugin(s) registered", lines)
        ann = self.cluster.node_annotations(node.name) if self.cluster else {}
        reg = ann.get(keys.REGISTER, "")
        details = [f"{keys.REGISTER}={reg}"]
        try:
            for rec in decode_register(reg):
                details.append(
                    f"  GPU {rec.uuid}: count={rec.count} devmem={rec.devmem}MiB type={rec.type} "
                    f"health={str(rec.health).lower()} mode={rec.mode}"
                )
        except ProtocolError as exc:
            details.append(f"  (cannot decode: {exc})")
        if keys.HANDSHAKE in ann:
            details.append(f"{keys.HANDSHAKE}={ann[keys.HANDSHAKE]}")
        self.event("node", f"{node.name} annotations written by the plugin", details)
        self._show_allocatable(node)

    def _show_allocatable(self, node: DemoNode) -> None:
        alloc = dict(node.allocatable)
        if alloc and alloc != self._allocatable_shown.get(node.name):
            self._allocatable_shown[node.name] = alloc
            self.event(
                "node",
                f"{node.name} status.allocatable (kubelet: healthy devices) "
                + " ".join(f"{k.split('/')[-1]}={v}" for k, v in alloc.items()),
            )

    # ------------------------------------------------------------------ 3: submission

    def _submit(self, cluster: DemoCluster, examples: list[Example]) -> None:
        self.out.heading("3. Scheduling the sample pods (deploy/examples)")
        for ex in examples:
            rec = PodRecord(ex)
            self.state.pods.append(rec)
            modes = {n.mode for n in self.options.nodes}
            if ex.wants_mode is not None and ex.wants_mode not in modes:
                rec.state = SKIPPED
                rec.skipped = f"asks for vgpu-mode {ex.wants_mode}; no node has that mode in this run"
                self.event("submit", f"{ex.key} skipped: {rec.skipped}")
                continue
            pod = cluster.api.store.create("pods", ex.manifest, ex.namespace)
            rec.uid = pod["metadata"]["uid"]
            rec.times["submitted"] = round(self.now(), 3)
            note = " (expected to stay Unschedulable)" if ex.expect == EXPECT_UNSCHEDULABLE else ""
            self.event("submit", f"{ex.key} from {ex.path.name}{note}")

    # ------------------------------------------------------------------ the loop

    def _loop(self, cluster: DemoCluster) -> None:
        announced = False
        while not self.stop_requested:
            cluster.check_children()
            self._progress_pods(cluster)
            if self._due("step", STEP_S):
                self._step_workloads()
            if self._due("nvml", NVML_UPDATE_S):
                self._update_nvml(cluster)
            if any(p.state == RUNNING for p in self.state.pods) and self._due("scrape", SCRAPE_S):
                self._scrape(cluster)
            self._xid(cluster)
            for node in cluster.nodes:
                self._show_allocatable(node)
                self.state.registers[node.name] = cluster.node_annotations(node.name).get(keys.REGISTER, "")
            if self.out.live and self._due("board", BOARD_S):
                self.out.board(board_lines(self.state, self.out))
            done = self._flow_done()
            if done and self._flow_done_at is None:
                self._flow_done_at = self.now()
                if self.options.duration is not None:
                    self.event("note", "scripted flow complete")
                else:
                    self.event("note", "scripted flow complete; containers keep running — press Ctrl-C to stop")
                    if not self.out.live:
                        self.out.board(board_lines(self.state, self.out))
            timed_out = self.clock() - self._flow_t0 > FLOW_TIMEOUT_S
            if timed_out and not done and not announced:
                announced = True
                self.event("warn", f"the scripted flow did not finish within {FLOW_TIMEOUT_S:.0f} s")
            if self.options.duration is not None and self.now() >= self.options.duration and (done or timed_out):
                break
            time.sleep(TICK_S)
        if self.stop_requested:
            self.state.interrupted = True

    def _flow_done(self) -> bool:
        s = self.state
        if not all(p.settled for p in s.pods):
            return False
        if any(p.key not in s.metrics_seen for p in s.hami_pods()):
            return False
        hami = [c for c in s.containers() if isinstance(c, HamiCoreContainer)]
        if hami and not any(c.feedback.seen for c in hami):
            return False
        if s.xid is None or s.xid.unhealthy_at is None:
            return False
        wants_mig = any(p.example.wants_mig and p.state == RUNNING for p in s.pods)
        return not wants_mig or s.mig is not None

    # ------------------------------------------------------------------ 3–5: pods

    def _progress_pods(self, cluster: DemoCluster) -> None:
        for rec in self.state.pods:
            if rec.settled:
                continue
            pod = cluster.api.store.try_get("pods", rec.example.namespace, rec.example.name)
            if pod is None:
                continue
            if rec.state == PENDING:
                self._check_scheduled(cluster, rec, pod)
            if rec.state == SCHEDULED:
                self._admit(cluster, rec, pod)
            if rec.state == ADMITTED:
                pod = cluster.api.store.get("pods", rec.example.namespace, rec.example.name)
                self._check_bound(cluster, rec, pod)

    def _check_scheduled(self, cluster: DemoCluster, rec: PodRecord, pod: dict[str, Any]) -> None:
        node = (pod.get("spec") or {}).get("nodeName")
        ann = dict((pod.get("metadata") or {}).get("annotations") or {})
        if node:
            rec.state, rec.node = SCHEDULED, node
            rec.scheduled_annotations = {k: ann[k] for k in keys.SCHEDULER_ALLOCATION_KEYS if k in ann}
            rec.times["scheduled"] = round(self.now(), 3)
            how = (
                "on the Binding"
                if cluster.scheduler and cluster.scheduler.switches.annotations_on_binding
                else "PATCHed before the Binding"
            )
            self.event(
                "schedule",
                f"{rec.key} → {node} (annotations {how})",
                [f"{k}={v}" for k, v in rec.scheduled_annotations.items()],
            )
            return
        outcome = cluster.scheduler.outcomes.get(rec.key) if cluster.scheduler else None
        if outcome is None or outcome.scheduled or not outcome.reason:
            return
        first = self._first_unschedulable.setdefault(rec.key, self.clock())
        if rec.example.expect == EXPECT_UNSCHEDULABLE or self.clock() - first >= UNSCHEDULABLE_AFTER_S:
            rec.state, rec.reason = UNSCHEDULABLE, outcome.reason
            rec.times["unschedulable"] = round(self.now(), 3)
            expected = "as expected" if rec.example.expect == EXPECT_UNSCHEDULABLE else "NOT expected"
            self.event(
                "schedule",
                f"{rec.key} stays Pending: Unschedulable ({expected})",
                [outcome.reason]
                + [f"{n}: {r}" for n, r in sorted(outcome.node_reasons.items()) if r not in outcome.reason],
            )

    def _admit(self, cluster: DemoCluster, rec: PodRecord, pod: dict[str, Any]) -> None:
        node = cluster.node(rec.node)
        result = node.admitter.admit(pod)
        rec.admission = result
        rec.times["admitted"] = round(self.now(), 3)
        for c in result.containers:
            if not c.calls:
                self.event("allocate", f"{rec.key} container {c.name}: no vGPU resources, no Allocate call")
                continue
            ids = "; ".join(
                f"{r.split('/')[-1]}: {len(v)} ID(s)" + (f" {v[0]}" if len(v) == 1 else "")
                for r, v in c.devices.items()
            )
            details = [f"kubelet → plugin Allocate ({ids})"]
            details += [f"env   {k}={v}" for k, v in sorted(c.envs.items())]
            details += [f"mount {m.container_path} ← {m.host_path}{' (ro)' if m.read_only else ''}" for m in c.mounts]
            details += [f"annotation {k}={v}" for k, v in sorted(c.annotations.items())]
            details += self._cdi_lines(node, c)
            self.event("allocate", f"{rec.key} container {c.name} on {rec.node}", details)
        if result.error:
            rec.state, rec.reason = FAILED, result.error
            self.event("error", f"{rec.key}: the kubelet rejected the pod: {result.error}")
            return
        rec.state = ADMITTED

    def _cdi_lines(self, node: DemoNode, c: ContainerResult) -> list[str]:
        """With a CDI strategy: the runtime's resolution (docs/cdi.md §5); a MIG device made by this
        Allocate needs the node's spec regenerated first (docs/cdi.md §7), as the demo shows."""
        if not self.options.uses_cdi:
            return []
        view = runtime_view(c, CdiResolver([node.dir / "cdi"]))
        lines = describe(view)
        if view.error is not None and node.spec.mig:
            write_spec(node.nvml, node.dir / "cdi")
            lines.append("spec regenerated after the MIG layout change (nvidia-ctk cdi generate), then:")
            lines += describe(runtime_view(c, CdiResolver([node.dir / "cdi"])))[len(view.cdi_names) :]
        return lines

    def _check_bound(self, cluster: DemoCluster, rec: PodRecord, pod: dict[str, Any]) -> None:
        ann = dict((pod.get("metadata") or {}).get("annotations") or {})
        phase = ann.get(keys.BIND_PHASE, "")
        if phase not in (keys.BIND_PHASE_SUCCESS, keys.BIND_PHASE_FAILED):
            return
        rec.bind_phase = phase
        rec.final_annotations = {k: ann[k] for k in keys.SCHEDULER_ALLOCATION_KEYS if k in ann}
        details = [f"{k}={v}" for k, v in rec.final_annotations.items()]
        if phase == keys.BIND_PHASE_FAILED:
            rec.state = FAILED
            reasons = [
                e.get("message", "")
                for e in cluster.api.store.list("events")
                if (e.get("involvedObject") or {}).get("uid") == rec.uid
            ]
            rec.reason = "; ".join(r for r in reasons if r) or "bind-phase=failed"
            self.event("error", f"{rec.key} bind-phase=failed: {rec.reason}", details)
            return
        rec.times["bound"] = round(self.now(), 3)
        self.event("pod", f"{rec.key} annotations after the plugin's Allocate", details)
        self._start_containers(cluster, rec)
        cluster.api.store.patch(
            "pods",
            rec.example.namespace,
            rec.example.name,
            {"status": {"phase": "Running"}},
            "merge",
            subresource="status",
        )
        rec.state = RUNNING

    def _start_containers(self, cluster: DemoCluster, rec: PodRecord) -> None:
        assert rec.admission is not None
        node = cluster.node(rec.node)
        for c in rec.admission.containers:
            if not c.calls or c.init:
                continue
            envs = {**container_env(rec.example.manifest, c.name), **c.envs}
            seen = runtime_view(c, CdiResolver([node.dir / "cdi"]) if self.options.uses_cdi else None).devices
            envs["NVIDIA_VISIBLE_DEVICES"] = ",".join(seen)  # the GPUs the container's NVML sees
            path = host_cache_file(c.envs, c.mounts)
            if path is not None:
                self._pid += 1
                high = envs.get("CUDA_TASK_PRIORITY", "").strip() == "0"
                sim = HamiCoreContainer(
                    rec.key,
                    c.name,
                    rec.node,
                    envs,
                    path,
                    self._pid,
                    duty=HIGH_PRIORITY_DUTY if high else Duty(),
                    phase=0.9 * len(self.state.containers()),
                )
                sim.start()
                rec.containers.append(sim)
                self.event(
                    "container",
                    f"{rec.key}/{c.name} started (libvgpu's part): shared region "
                    f"{sim.writer.variant.name if sim.writer else ''}",
                    [
                        f"host file {path}",
                        f"devices {', '.join(sim.uuids)}",
                        f"limits {', '.join(f'{b >> 20} MiB' for b in sim.limits)}; SM "
                        f"{', '.join(f'{s}%' for s in sim.sm_limits)}; priority {sim.priority}",
                    ],
                )
            elif envs["NVIDIA_VISIBLE_DEVICES"].startswith("MIG-"):
                mig = MigContainer(rec.key, c.name, rec.node, envs)
                mig.start()
                rec.containers.append(mig)
                self._show_mig(cluster, rec, mig)

    def _show_mig(self, cluster: DemoCluster, rec: PodRecord, mig: MigContainer) -> None:
        node = cluster.node(rec.node)
        state = node.nvml.read_state()
        ids = rec.scheduled_annotations.get(keys.VGPU_IDS_NEW, "")
        details = [
            f"{keys.VGPU_IDS_NEW}={ids}",
            f"NVIDIA_VISIBLE_DEVICES={','.join(mig.mig_uuids)}",
            "no HAMi-core env or mounts: isolation comes from the MIG hardware",
        ]
        details += _mig_layout_lines(rec.scheduled_annotations.get(keys.VGPU_IDS_NEW, ""), node, state)
        self.state.mig = {
            "pod": rec.key,
            "node": rec.node,
            "container": mig.name,
            "vgpu_ids_new": ids,
            "mig_uuids": mig.mig_uuids,
            "nvml_state": state,
        }
        self.event("mig", f"{rec.key}/{mig.name}: dynamic MIG instance on {rec.node}", details)

    # ------------------------------------------------------------------ 5: usage over time

    def _step_workloads(self) -> None:
        t = self.clock() - self._flow_t0
        for rec in self.state.pods:
            for c in rec.containers:
                for note in c.step(t):
                    self.state.feedback_notes.append(
                        {"t": round(self.now(), 3), "container": f"{rec.key}/{c.name}", "note": note}
                    )
                    self.event("feedback", f"{rec.key}/{c.name}: {note}")

    def _update_nvml(self, cluster: DemoCluster) -> None:
        """Host NVML follows the containers: memory used and utilization per GPU."""
        usage: dict[str, tuple[int, int]] = {}
        for c in self.state.containers():
            for uuid, (used, sm) in c.usage_by_uuid().items():
                b, s = usage.get(uuid, (0, 0))
                usage[uuid] = (b + used, s + sm)
        for node in cluster.nodes:
            if node.spec.mig:
                continue
            changed = False
            for dev in node.nvml.config["devices"]:
                used, sm = usage.get(dev["uuid"], (0, 0))
                new = {
                    "memory_used_mib": used >> 20,
                    "utilization_gpu": min(100, sm),
                    "utilization_memory": min(100, sm // 2),
                }
                if any(dev.get(k) != v for k, v in new.items()):
                    dev.update(new)
                    changed = True
            if changed:
                node.nvml.write()

    # ------------------------------------------------------------------ 6: metrics

    def _scrape(self, cluster: DemoCluster) -> None:
        for node in cluster.nodes:
            try:
                samples = scrape(node.metrics_url)
            except OSError as exc:
                self.event("warn", f"{node.name}: {exc}")
                continue
            first = node.name not in self.state.samples
            self.state.samples[node.name] = samples
            if first:
                host = host_samples(samples)
                self.event(
                    "metrics",
                    f"{node.name}: first scrape of {node.metrics_url}: {len(samples)} samples; host GPU series:",
                    [s.text() for s in host],
                )
            values = per_pod(samples)
            for rec in self.state.hami_pods():
                if rec.node != node.name or rec.key in self.state.metrics_seen or not values.get(rec.key):
                    continue
                self.state.metrics_seen[rec.key] = round(self.now(), 3)
                mine = pod_samples(samples, {rec.key})
                self.event(
                    "metrics", f"{rec.key}: {len(mine)} per-pod samples on {node.metrics_url}", [s.text() for s in mine]
                )
            for rec in self.state.pods:  # MIG pods: their identity family (no HAMi-core usage)
                if (
                    rec.state != RUNNING
                    or rec.node != node.name
                    or rec.key in self._mig_metrics_shown
                    or not any(isinstance(c, MigContainer) for c in rec.containers)
                ):
                    continue
                mine = pod_samples(samples, {rec.key})
                if mine:
                    self._mig_metrics_shown.add(rec.key)
                    self.event(
                        "metrics",
                        f"{rec.key}: {len(mine)} MIG sample(s) on {node.metrics_url}",
                        [s.text() for s in mine],
                    )

    # ------------------------------------------------------------------ 7: XID

    def _xid_target(self, cluster: DemoCluster) -> tuple[DemoNode, int] | None:
        hami = [n for n in cluster.nodes if not n.spec.mig] or cluster.nodes
        if not hami:
            return None
        node = hami[0]
        return node, len(node.spec.gpus) - 1

    def _xid(self, cluster: DemoCluster) -> None:
        s = self.state
        if s.xid is None:
            ready = all(p.settled for p in s.pods) and all(p.key in s.metrics_seen for p in s.hami_pods())
            late = self.clock() - self._flow_t0 > FLOW_TIMEOUT_S / 2
            if not (ready or late):
                return
            target = self._xid_target(cluster)
            if target is None:
                return
            node, index = target
            uuid = node.spec.gpus[index].uuid
            node.nvml.add_xid(index, XID)
            s.xid = XidRecord(node.name, index, uuid, XID, round(self.now(), 3))
            self.event(
                "xid",
                f"injected XID {XID} on {node.name} GPU {index} ({uuid}) through the fake NVML",
                ["the plugin's NVML event loop receives it: every fake device of that GPU turns unhealthy"],
            )
            return
        x = s.xid
        if x.unhealthy_at is not None:
            return
        node = cluster.node(x.node)
        counts: dict[str, tuple[int, int]] = {}
        mine: list[str] = []
        for res in RESOURCES:
            client = node.kubelet.plugin(res)
            if client is None:
                continue
            devices = list(client.devices)
            counts[res] = (sum(1 for _i, h in devices if h == HEALTHY), len(devices))
            if res == RESOURCES[0]:  # vgpu-number IDs are <GPU-UUID>-<i> (docs/decisions.md decision 3)
                mine = [h for i, h in devices if i.startswith(x.uuid + "-")]
        ann = cluster.node_annotations(x.node)
        try:
            health = {r.uuid: r.health for r in decode_register(ann.get(keys.REGISTER, ""))}
        except ProtocolError:
            health = {}
        kubelet_says_unhealthy = (
            bool(mine) and all(h != HEALTHY for h in mine) and all(h < t for h, t in counts.values())
        )
        if kubelet_says_unhealthy and health.get(x.uuid) is False:
            x.unhealthy_at = round(self.now(), 3)
            x.register_health = False
            x.kubelet_healthy = {r: f"{h}/{t}" for r, (h, t) in counts.items()}
            self.event(
                "health",
                f"{x.node} GPU {x.index} is unhealthy ({x.unhealthy_at - x.injected_at:.1f} s after the XID)",
                [f"kubelet ListAndWatch {r.split('/')[-1]}: {v} healthy" for r, v in x.kubelet_healthy.items()]
                + [f"{keys.REGISTER}={ann.get(keys.REGISTER, '')}"],
            )

    # ------------------------------------------------------------------ end

    def _final_snapshot(self, cluster: DemoCluster) -> None:
        """Node facts for the report, read before the teardown."""
        nodes = []
        for spec in self.options.nodes:
            node = next((n for n in cluster.nodes if n.name == spec.name), None)
            entry: dict[str, Any] = {
                "name": spec.name,
                "mode": spec.mode,
                "gpus": [
                    {"index": i, "uuid": g.uuid, "name": g.name, "memory_mib": g.memory_mib}
                    for i, g in enumerate(spec.gpus)
                ],
            }
            if node is not None:
                try:
                    ann = cluster.node_annotations(spec.name)
                except Exception:  # noqa: BLE001 - the store is in memory; this only guards a half-started run
                    ann = {}
                regs = [r for r in node.kubelet.registrations if r.accepted]
                entry.update(
                    {
                        "annotations": {k: v for k, v in ann.items() if k in (keys.REGISTER, keys.HANDSHAKE)},
                        "allocatable": dict(node.allocatable),
                        "registrations": [
                            {
                                "resource": r.resource_name,
                                "version": r.version,
                                "endpoint": r.endpoint,
                                "preferred_allocation": r.get_preferred_allocation_available,
                            }
                            for r in regs
                        ],
                        "kubelet": {
                            res: {"healthy": sum(1 for _i, h in c.devices if h == HEALTHY), "total": len(c.devices)}
                            for res in RESOURCES
                            if (c := node.kubelet.plugin(res)) is not None
                        },
                        "metrics_url": node.metrics_url,
                        "plugin": {"pid": node.plugin.pid, "log": str(node.plugin.log_path)},
                        "monitor": {"pid": node.monitor.pid, "log": str(node.monitor.log_path)},
                        "sockets": sorted(str(node.dir / "kubelet" / f) for f in _listdir(node.dir / "kubelet")),
                    }
                )
                entry["registered"] = (
                    len({r.resource_name for r in regs}) == len(RESOURCES)
                    and bool(ann.get(keys.REGISTER))
                    and (bool(ann.get(keys.HANDSHAKE)) or not cluster.scheduler_handshake)
                )
            nodes.append(entry)
        self.state.nodes = nodes
        for rec in self.state.pods:
            for c in rec.containers:
                try:
                    c.close()
                except OSError:
                    pass


def _mig_layout_lines(ids: str, node: DemoNode, state: dict[str, Any]) -> list[str]:
    """The group the scheduler chose (from knownMigGeometries) and the instances NVML now has."""
    out = []
    try:
        devices = [d for seg in decode_pod_devices(ids, annotation=keys.VGPU_IDS_NEW) for d in seg if d.mig]
    except ProtocolError:
        devices = []
    names = {g.uuid: g.name for g in node.spec.gpus}
    for d in devices:
        mig = d.mig
        assert mig is not None  # only MIG devices were kept
        entry = next(
            (e for e in DEFAULT_KNOWN_MIG_GEOMETRIES if any(m in names.get(d.uuid, "") for m in e.models)), None
        )
        group = next((g for g in entry.groups if g.group == mig.group), None) if entry else None
        if group is not None:
            slots = [t.name for t in group.geometries for _ in range(t.count)]
            kind = slots[mig.position] if mig.position < len(slots) else "?"
            out.append(
                f"{mig.group} = {' + '.join(f'{t.count} × {t.name}' for t in group.geometries)}; "
                f"position {mig.position} = {kind}"
            )
    for dev in state.get("devices", []) if isinstance(state, dict) else []:
        gis = []
        for gi in dev.get("gpu_instances", []):
            start, size = (gi.get("placement") or [0, 0])[:2]
            cis = ",".join(str(ci.get("id")) for ci in gi.get("compute_instances", []))
            gis.append(
                f"GI {gi.get('id')} (profile {gi.get('profile_id')}, memory slices {start}-{start + size - 1}, "
                f"CI {cis or 'none'})"
            )
        out.append(
            f"fake NVML {dev.get('uuid')}: MIG mode {'on' if dev.get('mig_mode') else 'off'}; "
            + ("; ".join(gis) or "no instances")
        )
    return out


def _listdir(path: Any) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
