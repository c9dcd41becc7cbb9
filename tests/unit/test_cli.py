import subprocess
import sys

from vgpu import __version__
from vgpu.cli import main


def test_version_flag_prints_version(capsys):
    try:
        main(["--version"])
    except SystemExit as exc:
        assert exc.code == 0
    assert __version__ in capsys.readouterr().out


def test_console_script_help_runs_as_a_process():
    out = subprocess.run([sys.executable, "-m", "vgpu", "--help"], capture_output=True, text=True, check=True)
    assert "usage: vgpu" in out.stdout
