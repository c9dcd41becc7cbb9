"""Terminal output: aligned tables, colour only when asked/on a TTY, live redraws that never wrap."""

from __future__ import annotations

import io

from vgpu.sim.demo.render import Printer, clip, human_bytes, short_uuid, table, visible_len


def test_table_aligns_columns_and_ignores_colour_codes():
    p = Printer(io.StringIO(), color=True)
    lines = table(["NAME", "N"], [[p.paint("ok", "green"), "1"], ["longer-name", "100"]], right=(1,))
    plain = [line.replace("\x1b[32m", "").replace("\x1b[0m", "") for line in lines]
    assert plain == ["  NAME           N", "  ok             1", "  longer-name  100"]


def test_no_colour_without_a_tty_or_with_no_color(monkeypatch):
    buf = io.StringIO()
    p = Printer(buf)
    assert not p.color and not p.live
    p.event("xid", "boom", ["detail"])
    assert "\x1b" not in buf.getvalue()
    assert buf.getvalue().splitlines()[0].endswith("xid       boom")
    assert buf.getvalue().splitlines()[1] == " " * 19 + "detail"

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert Printer(Tty()).color
    monkeypatch.setenv("NO_COLOR", "1")
    assert not Printer(Tty()).color and Printer(Tty()).live


def test_board_is_printed_once_without_a_tty_and_redrawn_in_place_on_one():
    buf = io.StringIO()
    Printer(buf).board(["a", "b"])
    assert buf.getvalue() == "a\nb\n"
    live = io.StringIO()
    p = Printer(live, color=False, live=True)
    p.board(["a", "b"])
    p.event("pod", "x")
    p.board(["c"])
    out = live.getvalue()
    assert out.count("\x1b[2F\x1b[J") == 2  # erased before the event and before the new board
    assert out.endswith("c\n")


def test_clip_keeps_escapes_and_width():
    s = "\x1b[33m" + "x" * 50 + "\x1b[0m"
    c = clip(s, 10)
    assert visible_len(c) == 10 and c.startswith("\x1b[33m") and c.endswith("…\x1b[0m")
    assert clip("short", 10) == "short"


def test_small_formatters():
    assert human_bytes(8 << 30) == "8.0 GiB" and human_bytes(512) == "512 B"
    assert short_uuid("GPU-3027c995-aea7-5442-8f21-81a962d2a515") == "GPU-3027c995…"
