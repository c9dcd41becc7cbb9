"""CDI device names and the device-list strategies, as text rules (docs/cdi.md §2–§4; pure, no I/O).

A container runtime with CDI injects a device it finds by its fully qualified name
``vendor/class=name`` in a spec file; the plugin hands those names to the kubelet in
``ContainerAllocateResponse.cdi_devices`` (strategy ``cdi-cri``) or in one ``cdi.k8s.io/…``
annotation per response (``cdi-annotations``).  This module builds and checks those strings and
names whole GPUs and MIG devices the way the NVIDIA Container Toolkit names them, so the names we
return are the names its spec files contain.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

# -- device-list strategies (docs/cdi.md §3) -----------------------------------------------------

ENVVAR = "envvar"
VOLUME_MOUNTS = "volume-mounts"
CDI_ANNOTATIONS = "cdi-annotations"
CDI_CRI = "cdi-cri"
STRATEGIES = (ENVVAR, VOLUME_MOUNTS, CDI_ANNOTATIONS, CDI_CRI)
CDI_STRATEGIES = frozenset({CDI_ANNOTATIONS, CDI_CRI})

# -- device-name strategies (docs/cdi.md §4) -----------------------------------------------------

NAME_UUID = "uuid"
NAME_INDEX = "index"
NAME_STRATEGIES = (NAME_UUID, NAME_INDEX)

DEFAULT_KIND = "nvidia.com/gpu"
DEFAULT_ANNOTATION_PREFIX = "cdi.k8s.io/"
DEFAULT_SPEC_DIRS = "/etc/cdi,/var/run/cdi"
"""Where containerd and CRI-O read CDI specs by default (comma-separated, as the setting)."""
ANNOTATION_PLUGIN_NAME = "vgpu-device-plugin"
"""The plugin part of our annotation keys (``<prefix><plugin>_<response id>``)."""
MAX_ANNOTATION_NAME = 63
"""The CDI library refuses a ``<plugin>_<id>`` annotation name longer than this."""

# VOLUME_MOUNTS: one /dev/null mount per device under this directory, and NVIDIA_VISIBLE_DEVICES
# naming the directory (the NVIDIA container runtime reads the file names).
VISIBLE_DEVICES_ENV = "NVIDIA_VISIBLE_DEVICES"
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
VOLUME_MOUNTS_HOST_PATH = "/dev/null"

_VENDOR = re.compile(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_CLASS = re.compile(r"[A-Za-z]([A-Za-z0-9_-]*[A-Za-z0-9])?")
_DEVICE = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_ANNOTATION_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class CdiError(ValueError):
    """A CDI name, kind, prefix or strategy that a runtime would refuse; the message says which part."""


@dataclass(frozen=True)
class QualifiedName:
    vendor: str
    cls: str
    device: str

    @property
    def kind(self) -> str:
        return f"{self.vendor}/{self.cls}"

    def __str__(self) -> str:
        return f"{self.vendor}/{self.cls}={self.device}"


def parse_kind(kind: str) -> tuple[str, str]:
    """``vendor/class`` → (vendor, class); raises :class:`CdiError` naming the bad part."""
    vendor, sep, cls = kind.partition("/")
    if not sep or not vendor or not cls:
        raise CdiError(f"CDI kind {kind!r}: expected vendor/class, e.g. {DEFAULT_KIND}")
    if not _VENDOR.fullmatch(vendor):
        raise CdiError(
            f"CDI kind {kind!r}: vendor {vendor!r} must start with a letter, end with a letter or digit "
            "and contain only letters, digits, '_', '-' and '.'"
        )
    if not _CLASS.fullmatch(cls):
        raise CdiError(
            f"CDI kind {kind!r}: class {cls!r} must start with a letter, end with a letter or digit "
            "and contain only letters, digits, '_' and '-'"
        )
    return vendor, cls


def check_device_name(name: str) -> str:
    if not _DEVICE.fullmatch(name):
        raise CdiError(
            f"CDI device name {name!r}: must start and end with a letter or digit and contain only "
            "letters, digits, '_', '-', '.' and ':'"
        )
    return name


def parse_qualified_name(text: str) -> QualifiedName:
    """``vendor/class=name`` → its parts; raises :class:`CdiError` (unqualified or invalid)."""
    kind, sep, device = text.partition("=")
    if not sep or not kind or not device:
        raise CdiError(f"CDI device {text!r} is not fully qualified (vendor/class=name)")
    vendor, cls = parse_kind(kind)
    check_device_name(device)
    return QualifiedName(vendor, cls, device)


def qualified_name(kind: str, device: str) -> str:
    parse_kind(kind)
    return f"{kind}={check_device_name(device)}"


# -- strategies ------------------------------------------------------------------------------------


def parse_strategies(text: str) -> tuple[str, ...]:
    """``envvar,cdi-cri`` → the strategies in the order given, duplicates dropped."""
    items = [s.strip() for s in text.split(",")]
    if not any(items):
        raise CdiError(f"device-list strategy: at least one of {', '.join(STRATEGIES)} is required")
    out: list[str] = []
    for s in items:
        if s not in STRATEGIES:
            raise CdiError(f"device-list strategy {s!r}: must be one of {', '.join(STRATEGIES)}")
        if s not in out:
            out.append(s)
    return tuple(out)


def parse_name_strategy(text: str) -> str:
    if text not in NAME_STRATEGIES:
        raise CdiError(f"CDI device-name strategy {text!r}: must be one of {', '.join(NAME_STRATEGIES)}")
    return text


def check_annotation_prefix(prefix: str) -> str:
    """A key prefix ``<dns-subdomain>/``, as Kubernetes annotation keys allow."""
    domain, sep, rest = prefix.partition("/")
    if not sep or rest:
        raise CdiError(f"CDI annotation prefix {prefix!r}: must be a DNS subdomain followed by '/'")
    if len(domain) > 253 or not all(_DNS_LABEL.fullmatch(p) for p in domain.split(".")):
        raise CdiError(f"CDI annotation prefix {prefix!r}: {domain!r} is not a lowercase DNS subdomain")
    return prefix


def annotation_key(prefix: str, response_id: str, plugin: str = ANNOTATION_PLUGIN_NAME) -> str:
    """``<prefix><plugin>_<response_id>`` with the CDI library's rules on the name part."""
    name = f"{plugin}_{response_id.replace('/', '_')}"
    if len(name) > MAX_ANNOTATION_NAME:
        raise CdiError(f"CDI annotation name {name!r}: longer than {MAX_ANNOTATION_NAME} characters")
    if not _ANNOTATION_NAME.fullmatch(name):
        raise CdiError(f"CDI annotation name {name!r}: only letters, digits, '_', '-' and '.' allowed")
    return check_annotation_prefix(prefix) + name


def annotation_value(names: Iterable[str]) -> str:
    """The comma-joined fully qualified names (each one checked)."""
    checked = [str(parse_qualified_name(n)) for n in names]
    if not checked:
        raise CdiError("CDI annotation value: no devices")
    return ",".join(checked)


# -- what the toolkit calls a GPU or MIG device (docs/cdi.md §4) ----------------------------------


def gpu_device_name(strategy: str, gpu_index: int, gpu_uuid: str) -> str:
    """``index``: the NVML index (``0``); ``uuid``: the GPU UUID (``GPU-…``)."""
    return str(gpu_index) if strategy == NAME_INDEX else check_device_name(gpu_uuid)


def mig_device_name(strategy: str, gpu_index: int, mig_index: int, mig_uuid: str) -> str:
    """``index``: ``<GPU index>:<MIG device index>`` (``0:1``); ``uuid``: the MIG UUID (``MIG-…``)."""
    return f"{gpu_index}:{mig_index}" if strategy == NAME_INDEX else check_device_name(mig_uuid)


def uses_cdi(strategies: Sequence[str]) -> bool:
    return any(s in CDI_STRATEGIES for s in strategies)


def only_cdi(strategies: Sequence[str]) -> bool:
    return bool(strategies) and all(s in CDI_STRATEGIES for s in strategies)
