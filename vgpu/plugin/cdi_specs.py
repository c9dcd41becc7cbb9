"""Whether the CDI specs this node's runtime will read name the devices the plugin hands out (docs/cdi.md §6).

With a CDI strategy a container starts only if the runtime resolves every CDI name of its
Allocate response in the spec files of its spec directories (``/etc/cdi``, ``/var/run/cdi``);
an unresolvable name fails the container's creation *after* the pod was admitted.  The plugin
sees the same directories (mounted read-only) and checks them at startup and on every Allocate,
so a missing or stale spec is reported where an operator looks: the log, a Warning Event on the
Node, and the ``vgpu_plugin_cdi_unresolved_devices`` gauge (:meth:`CdiSpecCheck.unresolved_devices`).

The directories are rescanned only when a directory or spec file changed (mtime, size); each
file is read up to :data:`MAX_SPEC_BYTES`, at most :data:`MAX_SPEC_FILES` per directory, and a
file that is not a valid spec is named in the problems and skipped (as the runtime skips it).
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from vgpu.protocol import cdi

log = logging.getLogger(__name__)

SPEC_SUFFIXES = (".json", ".yaml", ".yml")
MAX_SPEC_BYTES = 16 * 1024 * 1024
MAX_SPEC_FILES = 256


@dataclass(frozen=True)
class SpecScan:
    """What the spec directories name: fully qualified device names, and what was wrong."""

    names: frozenset[str] = frozenset()
    files: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def _spec_names(path: str, data: Any) -> list[str]:
    """The qualified names of one parsed spec; raises ValueError naming the field."""
    if not isinstance(data, dict):
        raise ValueError("not a CDI spec (expected a mapping with cdiVersion, kind, devices)")
    if not isinstance(data.get("cdiVersion"), str):
        raise ValueError("cdiVersion: missing or not a string")
    kind = data.get("kind")
    if not isinstance(kind, str):
        raise ValueError("kind: missing or not a string")
    try:
        cdi.parse_kind(kind)
    except cdi.CdiError as exc:
        raise ValueError(str(exc)) from None
    devices = data.get("devices")
    if not isinstance(devices, list):
        raise ValueError("devices: missing or not a list")
    names = []
    for i, dev in enumerate(devices):
        name = dev.get("name") if isinstance(dev, dict) else None
        if not isinstance(name, str):
            raise ValueError(f"devices[{i}].name: missing or not a string")
        try:
            names.append(cdi.qualified_name(kind, name))
        except cdi.CdiError as exc:
            raise ValueError(f"devices[{i}].name: {exc}") from None
    return names


def _read_spec(path: str) -> Any:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        chunks, total = [], 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > MAX_SPEC_BYTES:
                raise ValueError(f"larger than {MAX_SPEC_BYTES} bytes")
            chunks.append(chunk)
    finally:
        os.close(fd)
    return yaml.safe_load(b"".join(chunks).decode("utf-8"))


def _spec_files(directory: str) -> list[os.DirEntry[str]]:
    with os.scandir(directory) as it:
        entries = [e for e in it if e.name.endswith(SPEC_SUFFIXES) and not e.name.startswith(".")]
    return sorted(entries, key=lambda e: e.name)


def scan_spec_dirs(dirs: Sequence[str]) -> SpecScan:
    """Read every spec file of ``dirs`` (not recursive); never raises."""
    names: set[str] = set()
    files: list[str] = []
    problems: list[str] = []
    for d in dirs:
        try:
            entries = _spec_files(d)
        except FileNotFoundError:
            problems.append(f"{d}: no such directory (is it mounted into the plugin container?)")
            continue
        except OSError as exc:
            problems.append(f"{d}: cannot list: {exc.strerror or exc}")
            continue
        if len(entries) > MAX_SPEC_FILES:
            problems.append(f"{d}: {len(entries)} spec files; only the first {MAX_SPEC_FILES} are read")
            entries = entries[:MAX_SPEC_FILES]
        for e in entries:
            try:
                names.update(_spec_names(e.path, _read_spec(e.path)))
                files.append(e.path)
            except (OSError, ValueError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
                why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
                problems.append(f"{e.path}: skipped: {why}")
    return SpecScan(frozenset(names), tuple(files), tuple(problems))


def _signature(dirs: Sequence[str]) -> tuple[Any, ...]:
    """Changes whenever a directory's entries or a spec file's contents may have changed."""
    sig: list[Any] = []
    for d in dirs:
        try:
            st = os.stat(d)
            sig.append((d, st.st_mtime_ns, st.st_ino))
            for e in _spec_files(d)[: MAX_SPEC_FILES + 1]:
                try:
                    fst = e.stat(follow_symlinks=False)
                    sig.append((e.name, fst.st_mtime_ns, fst.st_size, fst.st_ino))
                except OSError:
                    sig.append((e.name, None))
        except OSError as exc:
            sig.append((d, exc.errno))
    return tuple(sig)


@dataclass
class CdiSpecCheck:
    """The devices the plugin hands out against the names the spec directories hold.

    ``expected`` grows with every name an Allocate returns (dynamic MIG creates devices after
    startup); :meth:`unresolved` rescans only when the directories changed.
    """

    dirs: tuple[str, ...]
    expected: set[str] = field(default_factory=set)
    _sig: tuple[Any, ...] | None = None
    _scan: SpecScan = field(default_factory=SpecScan)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expect(self, names: Iterable[str]) -> None:
        with self._lock:
            self.expected.update(names)

    def scan(self) -> SpecScan:
        with self._lock:
            return self._current()

    def _current(self) -> SpecScan:
        sig = _signature(self.dirs)
        if sig != self._sig:
            self._scan, self._sig = scan_spec_dirs(self.dirs), sig
        return self._scan

    def unresolved(self, names: Iterable[str] | None = None) -> list[str]:
        """The names (default: every expected one) that no visible spec names, sorted."""
        with self._lock:
            scan = self._current()
            wanted = self.expected if names is None else set(names)
            return sorted(n for n in wanted if n not in scan.names)

    def unresolved_devices(self) -> int:
        """The ``vgpu_plugin_cdi_unresolved_devices`` gauge: expected names no spec names."""
        return len(self.unresolved())

    def describe(self, unresolved: Sequence[str]) -> str:
        """One user-facing sentence: which names are missing where, and what to do."""
        scan = self.scan()
        seen = ", ".join(scan.files) or "no spec files"
        text = (
            f"CDI: {len(unresolved)} device name(s) the plugin hands out are in no CDI spec under "
            f"{', '.join(self.dirs)} ({seen}): {', '.join(unresolved[:8])}"
            f"{' …' if len(unresolved) > 8 else ''}; containers given them will fail to start. "
            "Generate the spec with the same name strategy (nvidia-ctk cdi generate "
            "--device-name-strategy=uuid|index), or set --cdi-device-name-strategy/--cdi-kind to match it"
        )
        if scan.problems:
            text += "; problems: " + "; ".join(scan.problems[:4])
        return text
