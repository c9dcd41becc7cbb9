"""Terminal output of `vgpu demo`: timestamped event lines, aligned tables, colour only on a TTY.

On a terminal the status tables stay at the bottom of the screen and are redrawn in place
(events scroll above them); anywhere else (a pipe, a file, CI) nothing is redrawn: tables are
printed as plain blocks at the milestones the demo chooses.  ``NO_COLOR`` disables colour.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import textwrap
import threading
import time
import unicodedata
from collections.abc import Sequence
from typing import TextIO

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
COLORS = {
    "bold": "1",
    "dim": "2",
    "red": "31",
    "green": "32",
    "yellow": "33",
    "blue": "34",
    "magenta": "35",
    "cyan": "36",
}
KIND_COLOR = {
    "api": "blue",
    "kubelet": "cyan",
    "node": "cyan",
    "submit": "magenta",
    "schedule": "magenta",
    "allocate": "green",
    "pod": "green",
    "container": "green",
    "metrics": "blue",
    "feedback": "yellow",
    "xid": "red",
    "health": "red",
    "mig": "magenta",
    "error": "red",
    "warn": "yellow",
    "note": "dim",
    "inspect": "magenta",
}


def visible_len(text: str) -> int:
    """Display width: ANSI escapes take no room; wide (East Asian) characters take two."""
    plain = _ANSI.sub("", text)
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in plain)


def pad(text: str, width: int, right: bool = False) -> str:
    gap = " " * max(0, width - visible_len(text))
    return gap + text if right else text + gap


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], *, right: Sequence[int] = (), indent: str = "  "
) -> list[str]:
    """Aligned columns (two spaces apart); ``right`` lists the right-aligned column indices."""
    widths = [visible_len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], visible_len(cell))
    lines = [indent + "  ".join(pad(h, widths[i], i in right) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        lines.append(indent + "  ".join(pad(c, widths[i], i in right) for i, c in enumerate(row)).rstrip())
    return lines


_BREAK_AFTER = re.compile(r"(?<=[ /,;-])")


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken after a space, ``/``, ``,``, ``;`` or
    ``-`` where possible (so a pod/container or a list wraps at its separators)."""
    lines: list[str] = []
    line = ""
    for token in _BREAK_AFTER.split(text):
        if visible_len(token) > width and line.strip():  # a token longer than the column starts a line
            lines.append(line.rstrip())
            line = ""
        while visible_len(token) > width:  # ... and is cut into column-wide pieces
            lines.append(token[:width])
            token = token[width:]
        if visible_len(line + token.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += token
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


def _render(
    headers: Sequence[str], rows: Sequence[Sequence[str]], widths: list[int], right: Sequence[int], indent: str
) -> list[str]:
    """Rows whose cells are wider than their column wrap onto continuation lines."""
    lines = [indent + "  ".join(pad(h, widths[i], i in right) for i, h in enumerate(headers)).rstrip()]
    for row in rows:
        parts = []
        for i, cell in enumerate(row):
            if visible_len(cell) <= widths[i]:
                parts.append([cell])
            else:
                parts.append(wrap_cell(_ANSI.sub("", cell), widths[i]))
        for k in range(max(len(p) for p in parts)):
            cells = [p[k] if k < len(p) else "" for p in parts]
            lines.append(indent + "  ".join(pad(c, widths[i], i in right) for i, c in enumerate(cells)).rstrip())
    return lines


def fit_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int,
    right: Sequence[int] = (),
    indent: str = "  ",
    wrap: Sequence[int] = (),
    notes: Sequence[int] = (),
) -> list[str]:
    """:func:`table`, made to fit ``width`` columns.

    First the cells of the ``notes`` columns become footnote marks (``[1]``) with their text
    wrapped below the table; then the ``wrap`` columns narrow, in the order given, never below
    their header, and their cells wrap onto continuation lines.
    """
    lines = table(headers, rows, right=right, indent=indent)
    if max(visible_len(ln) for ln in lines) <= width:
        return lines
    cells = [list(r) for r in rows]
    footnotes: list[str] = []
    for i in notes:
        for r in cells:
            if r[i] and visible_len(r[i]) > len(headers[i]):
                mark = f"[{len(footnotes) + 1}]"
                footnotes += textwrap.wrap(
                    f"{mark} {_ANSI.sub('', r[i])}", width - len(indent), subsequent_indent=" " * (len(mark) + 1)
                )
                r[i] = mark
    widths = [visible_len(h) for h in headers]
    for r in cells:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], visible_len(cell))
    total = len(indent) + sum(widths) + 2 * (len(widths) - 1)
    for i in wrap:  # in the caller's order of preference, each down to its header (at least 6)
        floor = max(visible_len(headers[i]), 6)
        cut = min(total - width, widths[i] - floor)
        if cut > 0:
            widths[i] -= cut
            total -= cut
    return _render(headers, cells, widths, right, indent) + [indent + f for f in footnotes]


def human_bytes(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def clip(text: str, width: int) -> str:
    """Cut ``text`` to ``width`` display columns, keeping ANSI escapes intact (live redraws must not wrap)."""
    if visible_len(text) <= width:
        return text
    out, used, i = [], 0, 0
    while i < len(text):
        m = _ANSI.match(text, i)
        if m:
            out.append(m.group(0))
            i = m.end()
            continue
        w = 2 if unicodedata.east_asian_width(text[i]) in "WF" else 1
        if used + w > width - 1:
            break
        out.append(text[i])
        used += w
        i += 1
    return "".join(out) + "…" + ("\x1b[0m" if "\x1b[" in text else "")


def short_uuid(uuid: str, keep: int = 8) -> str:
    """``GPU-1c5009f6…`` — enough to tell GPUs apart in a table (full UUIDs are in the event log)."""
    prefix, _, rest = uuid.partition("-")
    return f"{prefix}-{rest[:keep]}…" if rest else uuid


class Printer:
    """Writes events and tables; thread-safe.  ``color=None``: colour when ``stream`` is a TTY."""

    def __init__(
        self,
        stream: TextIO | None = None,
        *,
        color: bool | None = None,
        live: bool | None = None,
        start: float | None = None,
    ) -> None:
        self.stream = stream or sys.stdout
        tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.color = (tty and "NO_COLOR" not in os.environ) if color is None else color
        self.live = tty if live is None else live
        self.start = time.monotonic() if start is None else start
        self._lock = threading.Lock()
        self._board: list[str] = []  # the tables currently drawn at the bottom (live mode)
        self.width = max(40, shutil.get_terminal_size((80, 24)).columns - (1 if self.live else 0))
        """Tables are made to fit this many columns (the terminal's, or ``COLUMNS``, else 80)."""

    def paint(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(COLORS[s] for s in styles if s in COLORS)
        return f"\x1b[{codes}m{text}\x1b[0m" if codes else text

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    # ------------------------------------------------------------------ writing

    def _erase_board(self) -> None:
        if self._board:
            self.stream.write(f"\x1b[{len(self._board)}F\x1b[J")

    def _draw_board(self) -> None:
        if self._board:
            self.stream.write("\n".join(self._board) + "\n")

    def lines(self, lines: Sequence[str]) -> None:
        """Plain lines (above the live board)."""
        with self._lock:
            self._erase_board()
            for line in lines:
                self.stream.write(line + "\n")
            self._draw_board()
            self.stream.flush()

    def event(self, kind: str, text: str, details: Sequence[str] = ()) -> None:
        stamp = self.paint(f"[{self.elapsed():6.1f}s]", "dim")
        label = self.paint(pad(kind, 9), KIND_COLOR.get(kind, "bold"))
        out = [f"{stamp} {label} {text}"]
        out += [" " * 19 + d for d in details]
        self.lines(out)

    def heading(self, text: str) -> None:
        self.lines(["", self.paint(text, "bold")])

    def board(self, lines: Sequence[str]) -> None:
        """Live mode: replace the tables at the bottom.  Otherwise: print them once, as a block."""
        with self._lock:
            if self.live:
                self._erase_board()
                size = shutil.get_terminal_size((120, 40))
                rows = list(lines)[: max(1, size.lines - 2)]
                self._board = [clip(line, size.columns - 1) for line in rows]
                self._draw_board()
            else:
                self.stream.write("\n".join(lines) + "\n")
            self.stream.flush()

    def release_board(self) -> None:
        """Leave the last tables on screen as ordinary output (before the summary)."""
        with self._lock:
            self._board = []
