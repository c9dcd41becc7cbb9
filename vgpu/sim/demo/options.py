"""What `vgpu demo` runs: its options and the simulated nodes (pure; no I/O but reading a file).

A node has ONE operating mode (docs/configuration.md §3: ``operatingmode`` is per node), so the default
topology of the issue — "2 × A100-SXM4-80GB in hami-core sharing and 1 × A30 in MIG mode" — is
two simulated nodes, each with its own fake NVML, fake kubelet, ``vgpu plugin`` and
``vgpu monitor``, exactly as two GPU nodes of a real cluster would run them:

- ``gpu-node-1``: 2 × A100-SXM4-80GB, mode ``hami-core``;
- ``gpu-node-2``: 1 × A30, mode ``mig``.

``--gpus A100-80GB:2[,A10:1…]`` and ``--mode`` replace that with one node; ``--nodes FILE``
describes any set of nodes in JSON::

    {"nodes": [
      {"name": "gpu-node-1", "mode": "hami-core", "gpus": [{"model": "A100-80GB", "count": 2}]},
      {"name": "gpu-node-2", "mode": "mig",       "gpus": [{"model": "A30"}]},
      {"name": "gpu-node-3", "gpus": [{"name": "NVIDIA L40S", "memory_mib": 46068, "count": 4}]}
    ]}

A GPU entry names a ``model`` from :data:`GPU_MODELS`, or an NVML ``name`` plus ``memory_mib``.
"""

from __future__ import annotations

import json
import pathlib
import re
import uuid as uuidlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES
from vgpu.config.model import MODE_HAMI_CORE, MODE_MIG
from vgpu.protocol import cdi
from vgpu.sim.scheduler.versions import normalize_version, switches_for

MODES = (MODE_HAMI_CORE, MODE_MIG)
POLICIES = ("binpack", "spread", "none")
DEFAULT_POLICY = "binpack"
DEFAULT_VERSION = "master"
MAX_NODES = 4
MAX_GPUS_PER_NODE = 16
_NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_UUID_NAMESPACE = uuidlib.UUID("6f1c1e0e-3d0a-4c36-9a57-5b1f0d5e7a11")


class DemoConfigError(ValueError):
    """A demo option or node file that cannot work; the message names the option or key."""


@dataclass(frozen=True)
class GpuModel:
    name: str  # NVML name (nvmlDeviceGetName)
    memory_mib: int  # NVML memory total


# Short names a user types on the command line -> what the fake NVML reports.
GPU_MODELS: dict[str, GpuModel] = {
    "A100-80GB": GpuModel("NVIDIA A100-SXM4-80GB", 81920),
    "A100-40GB": GpuModel("NVIDIA A100-SXM4-40GB", 40960),
    "A30": GpuModel("NVIDIA A30", 24576),
    "H100-80GB": GpuModel("NVIDIA H100 80GB HBM3", 81559),
    "H200": GpuModel("NVIDIA H200 141GB HBM3e", 143771),
    "L4": GpuModel("NVIDIA L4", 23034),
    "A10": GpuModel("NVIDIA A10", 23028),
    "T4": GpuModel("Tesla T4", 15360),
}
_ALIASES = {"A100-SXM4-80GB": "A100-80GB", "A100-SXM4-40GB": "A100-40GB", "H100": "H100-80GB"}


def lookup_model(text: str, where: str) -> GpuModel:
    key = text.strip().upper()
    key = _ALIASES.get(key, key)
    model = GPU_MODELS.get(key)
    if model is None:
        raise DemoConfigError(
            f"{where}: unknown GPU model {text!r}; known: {', '.join(GPU_MODELS)} "
            "(or use --nodes FILE with an NVML name and memory_mib)"
        )
    return model


def mig_models() -> list[str]:
    """Short names of the models the built-in knownMigGeometries cover (docs/mig.md §2.1)."""
    return [k for k, m in GPU_MODELS.items() if _has_geometry(m.name)]


def _has_geometry(nvml_name: str) -> bool:
    return any(any(model in nvml_name for model in e.models) for e in DEFAULT_KNOWN_MIG_GEOMETRIES)


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_mib: int
    uuid: str


@dataclass(frozen=True)
class NodeSpec:
    name: str
    mode: str
    gpus: tuple[GpuSpec, ...]

    @property
    def mig(self) -> bool:
        return self.mode == MODE_MIG


@dataclass(frozen=True)
class DemoOptions:
    nodes: tuple[NodeSpec, ...]
    volcano_version: str = DEFAULT_VERSION
    policy: str = DEFAULT_POLICY
    duration: float | None = None
    json: bool = False
    examples_dir: pathlib.Path | None = None
    color: bool | None = None  # None: only on a TTY (and not with NO_COLOR)
    notes: tuple[str, ...] = field(default=())
    device_list_strategy: str = cdi.ENVVAR  # the plugins' --device-list-strategy (docs/cdi.md §3)

    @property
    def uses_cdi(self) -> bool:
        return cdi.uses_cdi(self.device_list_strategy.split(","))

    @property
    def scheduler_policy(self) -> str:
        """``SchedulerConfig.policy``: ``none`` is Volcano's unset policy."""
        return "" if self.policy == "none" else self.policy

    @property
    def mig_supported(self) -> bool:
        """Dynamic MIG needs Volcano >= v1.12 (docs/compatibility.md#volcano-scheduler)."""
        return switches_for(self.volcano_version).mig

    @property
    def mig_nodes(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.mig]


def gpu_uuid(node: str, index: int) -> str:
    """A stable, realistic GPU UUID per node and index (same on every run: readable diffs)."""
    return f"GPU-{uuidlib.uuid5(_UUID_NAMESPACE, f'{node}/{index}')}"


def _node(name: str, mode: str, models: Sequence[GpuModel], where: str) -> NodeSpec:
    if not _NODE_NAME_RE.match(name):
        raise DemoConfigError(f"{where}.name: {name!r} is not a DNS-1123 node name")
    if mode not in MODES:
        raise DemoConfigError(f"{where}.mode: must be one of {', '.join(MODES)}, got {mode!r}")
    if not models:
        raise DemoConfigError(f"{where}.gpus: a node needs at least one GPU")
    if len(models) > MAX_GPUS_PER_NODE:
        raise DemoConfigError(f"{where}.gpus: at most {MAX_GPUS_PER_NODE} GPUs per node, got {len(models)}")
    if mode == MODE_MIG:
        for m in models:
            if not _has_geometry(m.name):
                raise DemoConfigError(
                    f"{where}: {m.name!r} has no built-in knownMigGeometries entry, so mode mig cannot use it; "
                    f"MIG models: {', '.join(mig_models())}"
                )
    gpus = tuple(GpuSpec(m.name, m.memory_mib, gpu_uuid(name, i)) for i, m in enumerate(models))
    return NodeSpec(name, mode, gpus)


def default_nodes() -> tuple[NodeSpec, ...]:
    return (
        _node("gpu-node-1", MODE_HAMI_CORE, [GPU_MODELS["A100-80GB"]] * 2, "default"),
        _node("gpu-node-2", MODE_MIG, [GPU_MODELS["A30"]], "default"),
    )


def parse_gpus(text: str, where: str = "--gpus") -> list[GpuModel]:
    """``A100-80GB:2,A10:1`` (count defaults to 1)."""
    out: list[GpuModel] = []
    for item in (p.strip() for p in text.split(",")):
        if not item:
            raise DemoConfigError(f"{where}: empty entry in {text!r} (use MODEL:COUNT[,MODEL:COUNT…])")
        model_text, _, count_text = item.partition(":")
        count = 1
        if count_text:
            if not count_text.isdigit() or int(count_text) < 1:
                raise DemoConfigError(
                    f"{where}: count of {model_text!r} must be a positive integer, got {count_text!r}"
                )
            count = int(count_text)
        out.extend([lookup_model(model_text, where)] * count)
    return out


def single_node(gpus: str | None, mode: str | None) -> tuple[NodeSpec, ...]:
    """``--gpus`` / ``--mode``: one node; the missing half gets the mode's usual GPUs."""
    mode = mode or MODE_HAMI_CORE
    if gpus is None:
        models = [GPU_MODELS["A30"]] if mode == MODE_MIG else [GPU_MODELS["A100-80GB"]] * 2
    else:
        models = parse_gpus(gpus)
    return (_node("gpu-node-1", mode, models, "--gpus/--mode"),)


def _gpu_entries(raw: Any, where: str) -> list[GpuModel]:
    if not isinstance(raw, list) or not raw:
        raise DemoConfigError(f"{where}: must be a non-empty list of GPU entries")
    out: list[GpuModel] = []
    for k, entry in enumerate(raw):
        at = f"{where}[{k}]"
        if not isinstance(entry, Mapping):
            raise DemoConfigError(f"{at}: must be an object, got {json.dumps(entry)}")
        unknown = set(entry) - {"model", "name", "memory_mib", "count"}
        if unknown:
            raise DemoConfigError(f"{at}: unknown key(s) {', '.join(sorted(unknown))}")
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise DemoConfigError(f"{at}.count: must be an integer >= 1, got {json.dumps(count)}")
        if "model" in entry:
            if "name" in entry or "memory_mib" in entry:
                raise DemoConfigError(f"{at}: give either model or name + memory_mib, not both")
            if not isinstance(entry["model"], str):
                raise DemoConfigError(f"{at}.model: must be a string")
            model = lookup_model(entry["model"], f"{at}.model")
        else:
            name, mem = entry.get("name"), entry.get("memory_mib")
            if not isinstance(name, str) or not name.strip() or len(name) >= 64:
                raise DemoConfigError(f"{at}.name: an NVML name (1–63 characters) is required without model")
            if isinstance(mem, bool) or not isinstance(mem, int) or mem < 1:
                raise DemoConfigError(f"{at}.memory_mib: must be an integer >= 1, got {json.dumps(mem)}")
            model = GpuModel(name, mem)
        out.extend([model] * count)
    return out


def parse_nodes_file(path: pathlib.Path) -> tuple[NodeSpec, ...]:
    """``--nodes FILE``: errors name the file and the key path."""
    try:
        doc = json.loads(pathlib.Path(path).read_text())
    except OSError as exc:
        raise DemoConfigError(f"--nodes {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise DemoConfigError(f"--nodes {path}: not valid JSON: {exc}") from None
    if not isinstance(doc, Mapping) or not isinstance(doc.get("nodes"), list) or not doc["nodes"]:
        raise DemoConfigError(f'--nodes {path}: the root must be {{"nodes": [...]}} with at least one node')
    if len(doc["nodes"]) > MAX_NODES:
        raise DemoConfigError(f"--nodes {path}: at most {MAX_NODES} nodes, got {len(doc['nodes'])}")
    nodes = []
    for i, raw in enumerate(doc["nodes"]):
        where = f"{path}: nodes[{i}]"
        if not isinstance(raw, Mapping):
            raise DemoConfigError(f"{where}: must be an object")
        unknown = set(raw) - {"name", "mode", "gpus"}
        if unknown:
            raise DemoConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}")
        name = raw.get("name", f"gpu-node-{i + 1}")
        if not isinstance(name, str):
            raise DemoConfigError(f"{where}.name: must be a string")
        mode = raw.get("mode", MODE_HAMI_CORE)
        nodes.append(_node(name, mode, _gpu_entries(raw.get("gpus"), f"{where}.gpus"), where))
    names = [n.name for n in nodes]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise DemoConfigError(f"--nodes {path}: node name {dup!r} is used twice")
    return tuple(nodes)


def build_options(
    *,
    volcano_version: str = DEFAULT_VERSION,
    policy: str = DEFAULT_POLICY,
    gpus: str | None = None,
    mode: str | None = None,
    nodes_file: str | None = None,
    duration: float | None = None,
    json_output: bool = False,
    examples_dir: str | None = None,
    color: bool | None = None,
    device_list_strategy: str = cdi.ENVVAR,
) -> DemoOptions:
    """Validate the command line into :class:`DemoOptions` (raises :class:`DemoConfigError`)."""
    try:
        strategies = ",".join(cdi.parse_strategies(device_list_strategy))
    except cdi.CdiError as exc:
        raise DemoConfigError(f"--device-list-strategy: {exc}") from None
    try:
        version = normalize_version(volcano_version)
    except ValueError as exc:
        raise DemoConfigError(f"--volcano-version: {exc}") from None
    if policy not in POLICIES:
        raise DemoConfigError(f"--policy: must be one of {', '.join(POLICIES)}, got {policy!r}")
    if mode is not None and mode not in MODES:
        raise DemoConfigError(f"--mode: must be one of {', '.join(MODES)}, got {mode!r}")
    if duration is not None and not duration > 0:
        raise DemoConfigError(f"--duration: must be a positive number of seconds, got {duration}")
    if nodes_file is not None:
        if gpus is not None or mode is not None:
            raise DemoConfigError("--nodes cannot be combined with --gpus or --mode (the file sets both)")
        nodes = parse_nodes_file(pathlib.Path(nodes_file))
    elif gpus is not None or mode is not None:
        nodes = single_node(gpus, mode)
    else:
        nodes = default_nodes()
    notes = []
    if not switches_for(version).mig and any(n.mig for n in nodes):
        notes.append(
            f"Volcano {version} has no dynamic MIG (needs >= v1.12): the MIG node(s) and the MIG example are left out"
        )
        nodes = tuple(n for n in nodes if not n.mig)
        if not nodes:
            raise DemoConfigError(
                f"--volcano-version {version}: every node is in mode mig, which needs Volcano >= v1.12"
            )
    return DemoOptions(
        nodes=nodes,
        volcano_version=version,
        policy=policy,
        duration=duration,
        json=json_output,
        examples_dir=pathlib.Path(examples_dir) if examples_dir else None,
        color=color,
        notes=tuple(notes),
        device_list_strategy=strategies,
    )
