"""`vgpu inspect cache PATH` (text and --json) and the inspect form dispatch."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from tests.unit.hamicore import scenario
from vgpu.cli import inspect as inspect_cli


def run_inspect(argv: list[str]) -> int:
    """Only the inspect command, parsed exactly as `vgpu` parses it."""
    parser = argparse.ArgumentParser(prog="vgpu")
    inspect_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["inspect", *argv])
    return args.func(args)


def test_text_output_of_a_real_hami_core_file(real_fixtures, capsys):
    assert run_inspect(["cache", str(real_fixtures["v1.2-four-processes.cache.gz"])]) == 0
    out = capsys.readouterr().out
    assert "layout:      v1.2 (header 1.2), 2008953 bytes" in out
    assert "device 0:    GPU-8664316c-6888-5063-1e4d-f2a09cfbf180  used 1924 MiB" in out
    assert "sm_util 37%" in out
    assert "slot 2       pid 9396 hostpid 9396 running seq 6" in out
    assert "[0] 3000 MiB / SM 50%, [1] 2048 MiB / SM 50%" in out


def test_json_output_lists_header_devices_and_every_slot(real_fixtures, capsys):
    path = real_fixtures["v1.2-after-exit.cache.gz"]
    assert run_inspect(["cache", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layout"] == "v1.2" and doc["version"] == "1.2" and doc["path"] == str(path)
    assert doc["live_procs"] == 3 and doc["proc_num"] == 4
    assert [d["used_bytes"] for d in doc["devices"]] == [600 * 2**20, 60 * 2**20]
    assert [s["pid"] for s in doc["slots"]] == [9397, 9398, 0, 9399]
    assert [s["in_use"] for s in doc["slots"]] == [True, True, False, True]


@pytest.mark.parametrize("variant", scenario.VARIANTS)
def test_every_layout_inspects(tmp_path, variant, capsys):
    path = scenario.standard_region(tmp_path / "r.cache", variant)
    assert run_inspect(["--json", "cache", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["layout"] == variant and len(doc["slots"]) == 5
    assert run_inspect(["cache", str(path)]) == 0
    assert f"layout:      {variant}" in capsys.readouterr().out


def test_bad_files_exit_1_with_the_precise_error(tmp_path, capsys):
    fifo = tmp_path / "x.cache"
    os.mkfifo(fifo)
    assert run_inspect(["cache", str(fifo)]) == 1
    assert f"vgpu inspect: {fifo}: is a FIFO, not a regular file [NOT_REGULAR]" in capsys.readouterr().err
    short = tmp_path / "short.cache"
    short.write_bytes(b"\0" * 10)
    assert run_inspect(["cache", str(short), "--json"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"]["code"] == "SIZE"
    assert "size 10 bytes is not a HAMi-core region size" in captured.err


def test_usage_errors(capsys):
    assert run_inspect(["cache"]) == 2
    assert "usage: vgpu inspect [--json] cache PATH" in capsys.readouterr().err
    assert run_inspect(["cache", "a", "b"]) == 2


def test_forms_are_a_dispatch_table():
    forms = inspect_cli.load_forms()
    assert forms["cache"].usage == "cache PATH" and forms["cache"].nargs == 1


def test_through_the_real_cli_process(real_fixtures):
    out = subprocess.run(
        [sys.executable, "-m", "vgpu", "inspect", "cache", str(real_fixtures["v1.2-empty.cache.gz"]), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["limits"] == [4 * 2**30] * 16 and doc["sm_limits"] == [100] * 16 and doc["live_procs"] == 0
