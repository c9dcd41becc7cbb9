"""Which modules a real `vgpu` child process loaded: its own ``sys.modules``, written when it exits.

``vgpu_with_module_dump(args, path)`` turns ``[python, "-m", "vgpu", ARGS...]`` into the same
process started through ``python -c``: it runs the real ``vgpu.cli.main`` with the same ARGS
and, at interpreter exit (after ``main`` returned and the non-daemon threads were joined),
writes the names in its ``sys.modules`` to ``path``, one per line.  Whatever the process
imported at any time (startup, threads, signal handlers, ``importlib``) is in that list.
"""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

_WRAPPER = (
    "import atexit, sys\n"
    "def _dump(path=sys.argv.pop(1)):\n"
    "    with open(path, 'w') as f:\n"
    "        f.write('\\n'.join(sorted(sys.modules)))\n"
    "atexit.register(_dump)\n"
    "sys.argv[0] = 'vgpu'\n"
    "from vgpu.cli import main\n"
    "sys.exit(main())\n"
)


def vgpu_with_module_dump(args: Sequence[str], path: pathlib.Path) -> list[str]:
    """``[python, "-m", "vgpu", *rest]`` → ``[python, "-c", WRAPPER, path, *rest]``."""
    assert list(args[1:3]) == ["-m", "vgpu"], args
    return [args[0], "-c", _WRAPPER, str(path), *args[3:]]


def loaded_modules(path: pathlib.Path) -> set[str]:
    """The module names the process wrote at exit (fails if it did not exit through Python)."""
    assert path.exists(), f"{path}: the process wrote no module list (killed, or crashed before exit)"
    return set(path.read_text().split())


def under(modules: set[str], *packages: str) -> list[str]:
    """The sorted ``modules`` that are one of ``packages`` or inside one."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))
