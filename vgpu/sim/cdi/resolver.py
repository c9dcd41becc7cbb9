"""The container runtime's side of CDI, for tests and the demo (docs/cdi.md §2, §5).

containerd (``enable_cdi``) and CRI-O keep a registry of the spec files in their spec
directories and, when the kubelet creates a container, resolve every CDI name of the
container — ``CDIDevices`` of the CRI request and the ``cdi.k8s.io/*`` annotations — to its
spec entry and apply the entry's container edits; one name it cannot resolve fails the
container (``unresolvable CDI devices …``).  :class:`CdiResolver` does that over a directory
of spec files, with its own reading of the name rules (it deliberately does not reuse the
plugin's code, so a plugin bug cannot hide behind a shared one).
"""

from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

ANNOTATION_PREFIX = "cdi.k8s.io/"
_VENDOR = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
_CLASS = re.compile(r"^[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?$")
_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?$")
_ANNOTATION_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")


class UnresolvableCdiDevices(Exception):
    """What the runtime answers CreateContainer with; the container does not start."""


class InvalidCdiRequest(UnresolvableCdiDevices):
    """A name or annotation the runtime refuses before looking anything up."""


@dataclass
class ContainerEdits:
    """The merged edits of the resolved devices (the part of the OCI spec CDI changes)."""

    env: list[str] = field(default_factory=list)
    device_nodes: list[str] = field(default_factory=list)
    mounts: list[tuple[str, str]] = field(default_factory=list)  # (host, container)
    hooks: list[str] = field(default_factory=list)

    def add(self, edits: Mapping[str, Any]) -> None:
        self.env.extend(str(e) for e in edits.get("env") or ())
        self.device_nodes.extend(str(d.get("path")) for d in edits.get("deviceNodes") or ())
        self.mounts.extend((str(m.get("hostPath")), str(m.get("containerPath"))) for m in edits.get("mounts") or ())
        self.hooks.extend(f"{h.get('hookName')}:{h.get('path')}" for h in edits.get("hooks") or ())


def split_name(name: str) -> tuple[str, str, str]:
    """``vendor/class=name`` → parts, as the runtime's parser accepts it."""
    kind, eq, device = name.partition("=")
    vendor, slash, cls = kind.partition("/")
    if not (eq and slash and _VENDOR.match(vendor) and _CLASS.match(cls) and _NAME.match(device)):
        raise InvalidCdiRequest(f"invalid CDI device name {name!r} (want vendor/class=name)")
    return vendor, cls, device


def names_of(cdi_devices: Iterable[str], annotations: Mapping[str, str]) -> list[str]:
    """The CDI names a container asks for: CRI ``CDIDevices`` plus ``cdi.k8s.io/*`` annotations."""
    names = list(cdi_devices)
    for key, value in annotations.items():
        if not key.startswith(ANNOTATION_PREFIX):
            continue
        if not _ANNOTATION_NAME.match(key[len(ANNOTATION_PREFIX) :]):
            raise InvalidCdiRequest(f"invalid CDI annotation key {key!r}")
        for n in value.split(","):
            split_name(n)  # each one fully qualified, no empty entries
            names.append(n)
    return list(dict.fromkeys(names))


class CdiResolver:
    """Spec files of ``dirs`` (later directories win on a name both define), read on :meth:`refresh`."""

    def __init__(self, dirs: Sequence[str | pathlib.Path]) -> None:
        self.dirs = [pathlib.Path(d) for d in dirs]
        self.devices: dict[str, dict[str, Any]] = {}
        self.common: dict[str, dict[str, Any]] = {}  # kind -> spec-level containerEdits
        self.errors: list[str] = []
        self.refresh()

    def refresh(self) -> None:
        self.devices, self.common, self.errors = {}, {}, []
        for d in self.dirs:
            if not d.is_dir():
                continue
            for path in sorted(p for p in d.iterdir() if p.suffix in (".json", ".yaml", ".yml")):
                try:
                    self._load(path)
                except (ValueError, OSError, yaml.YAMLError) as exc:
                    self.errors.append(f"{path}: {exc}")

    def _load(self, path: pathlib.Path) -> None:
        text = path.read_text()
        spec = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        if not isinstance(spec, dict) or not isinstance(spec.get("cdiVersion"), str):
            raise ValueError("no cdiVersion")
        kind = spec.get("kind")
        vendor, _, cls = str(kind).partition("/")
        if not (_VENDOR.match(vendor) and _CLASS.match(cls)):
            raise ValueError(f"invalid kind {kind!r}")
        self.common[str(kind)] = spec.get("containerEdits") or {}
        for dev in spec.get("devices") or ():
            name = dev.get("name", "")
            if not _NAME.match(str(name)):
                raise ValueError(f"invalid device name {name!r}")
            self.devices[f"{kind}={name}"] = dev

    @property
    def names(self) -> list[str]:
        return sorted(self.devices)

    def resolve(self, names: Iterable[str]) -> ContainerEdits:
        """The merged edits of ``names``; raises :class:`UnresolvableCdiDevices` as the runtime does."""
        wanted = list(names)
        for n in wanted:
            split_name(n)
        missing = [n for n in wanted if n not in self.devices]
        if missing:
            raise UnresolvableCdiDevices(f"unresolvable CDI devices {', '.join(missing)}")
        edits = ContainerEdits()
        kinds = []
        for n in wanted:
            kind = n.partition("=")[0]
            if kind not in kinds:
                kinds.append(kind)
                edits.add(self.common.get(kind) or {})
            edits.add(self.devices[n].get("containerEdits") or {})
        return edits

    def resolve_container(self, cdi_devices: Iterable[str], annotations: Mapping[str, str]) -> ContainerEdits:
        return self.resolve(names_of(cdi_devices, annotations))
