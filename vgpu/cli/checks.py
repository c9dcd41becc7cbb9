"""Start-up checks of the daemons' settings, run before any slow step (NVML, the pod-watch wait).

Why here and not in the daemons: an operator who mistypes ``--handshake`` or ``--listen`` should
read one line naming the flag (or its env variable) and the value within a second, not after NVML
has started or a 5 s pod-watch wait has passed.  Each check raises :class:`StartupError` with that
line and the exit status (2 for a usage or configuration error, 1 for a runtime condition such as
a port another process holds); docs/configuration.md §5 lists them.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

log = logging.getLogger("vgpu.cli")

EXIT_CONFIG = 2
EXIT_RUNTIME = 1


@dataclass
class StartupError(Exception):
    message: str
    status: int = EXIT_CONFIG

    def __str__(self) -> str:
        return self.message


def check_choice(value: str, where: str, choices: tuple[str, ...]) -> str:
    """``value`` (any case, trimmed) when it is one of ``choices``."""
    normal = value.strip().lower()
    if normal not in choices:
        flag, _, origin = where.partition(" ")
        shown = f" [{origin.strip('()')}]" if origin else ""
        raise StartupError(f"{flag}: must be one of {', '.join(choices)} (got {value!r}){shown}")
    return normal


def check_kubeconfig(path: str | None, where: str, *, required: bool) -> None:
    """The kubeconfig loads (a malformed file is named with its line and column).

    ``required``: without a kubeconfig the in-cluster service account must be there.
    """
    from vgpu.kube.client import KubeConfigError, in_cluster_available, load_configuration

    if not path:
        if required and not in_cluster_available():
            raise StartupError(
                "no kubeconfig given (--kubeconfig or KUBECONFIG) and no in-cluster service account (not in a pod)"
            )
        return
    try:
        load_configuration(path)
    except KubeConfigError as exc:
        raise StartupError(f"{where}: {exc}") from None


def check_config_file(path: str | None, where: str, default: str) -> None:
    """A config file path: a missing file is allowed (built-in defaults, docs/decisions.md decision 2).

    At the DaemonSet's mount point (the default) nothing is said.  Elsewhere, a missing
    *directory* is an error — a ConfigMap volume always creates its directory, so this is a
    mistyped path — and a missing file in an existing directory a WARNING naming the path (an
    optional ConfigMap at a custom path is legitimate, a typo is likelier).
    """
    if not path or os.path.lexists(path) or os.path.abspath(path) == os.path.abspath(default):
        return  # the DaemonSet's mount point: an optional ConfigMap, missing means defaults
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise StartupError(f"{where}: {path}: directory {parent} does not exist (mistyped path?)")
    log.warning("%s: %s does not exist; running on built-in defaults", where, path)


def check_port_free(host: str, port: int, where: str) -> None:
    """Bind (and release) ``host:port`` as the server will, so a busy port is found now."""
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise StartupError(f"{where}: {host}:{port} is already in use", EXIT_RUNTIME) from None
        if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT) or isinstance(exc, socket.gaierror):
            raise StartupError(f"{where}: {host} is not an address of this host ({exc.strerror or exc})") from None
        raise StartupError(f"{where}: cannot listen on {host}:{port}: {exc.strerror or exc}", EXIT_RUNTIME) from None


class _Daemon(Protocol):
    def install_signal_handlers(self) -> None: ...
    def run(self) -> int: ...


_Options = TypeVar("_Options")


def start_daemon(
    command: str,
    args: Any,
    environ: Mapping[str, str],
    resolve: Callable[[Any, Mapping[str, str]], _Options],
    check: Callable[[_Options, Any, Mapping[str, str]], None],
    make: Callable[[_Options], _Daemon],
) -> int:
    """Resolve and check a daemon's settings (one line, exit 2 on a bad one), then run it.

    Both `vgpu plugin` and `vgpu monitor` start this way, so a bad setting reads the same
    (``vgpu <command>: <what> [<where>]``) before either does anything slow.
    """
    log = logging.getLogger(f"vgpu.{command}.command")
    try:
        opts = resolve(args, environ)
    except ValueError as exc:
        log.error("vgpu %s: %s", command, exc)
        return EXIT_CONFIG
    try:
        check(opts, args, environ)
    except StartupError as exc:
        log.error("vgpu %s: %s", command, exc)
        return exc.status
    daemon = make(opts)
    daemon.install_signal_handlers()
    return daemon.run()
