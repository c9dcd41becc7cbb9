"""Bad input to the real `vgpu` processes: one line naming what and where, the right exit status,
found before any slow start-up step; log flags before or after the subcommand and from env."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest
import yaml

MALFORMED = "apiVersion: v1\nclusters:\n- cluster: {server: x\n  name: a\n"


def vgpu(
    *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> tuple[subprocess.CompletedProcess, float]:
    from vgpu.sim.processes import subprocess_env

    e = subprocess_env(env or {})
    for k in ("NODE_NAME", "KUBECONFIG", "VGPU_LOG_LEVEL", "VGPU_LOG_FORMAT", "VGPU_HANDSHAKE", "VGPU_LISTEN"):
        if k not in (env or {}):
            e.pop(k, None)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "vgpu", *args], capture_output=True, text=True, env=e, timeout=timeout)
    return out, time.monotonic() - t0


@pytest.fixture(scope="module")
def startup_s() -> float:
    """What the interpreter and the CLI's imports cost before any check can run (the baseline)."""
    best = min(vgpu("plugin", "--help")[1] for _ in range(2))
    return best


def one_line(out: subprocess.CompletedProcess) -> str:
    lines = [ln for ln in (out.stderr + out.stdout).splitlines() if ln.strip()]
    assert "Traceback" not in out.stderr, out.stderr
    assert len(lines) == 1, lines
    return lines[0]


@pytest.fixture
def good_kubeconfig(tmp_path):
    p = tmp_path / "good.kubeconfig"
    p.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return p


@pytest.mark.parametrize("command", ["plugin", "monitor"])
def test_malformed_kubeconfig_is_one_line_naming_file_line_and_column(tmp_path, command, startup_s):
    bad = tmp_path / "kubeconfig"
    bad.write_text(MALFORMED)
    out, took = (
        vgpu(command, "--node-name", "n1", "--listen", "127.0.0.1:0", env={"KUBECONFIG": str(bad)})
        if (command == "monitor")
        else vgpu(command, "--node-name", "n1", env={"KUBECONFIG": str(bad)})
    )
    assert out.returncode == 2
    line = one_line(out)
    assert "(env KUBECONFIG)" in line  # where the path came from
    assert f"cannot load kubeconfig {bad}: not valid YAML" in line and "line 4, column 7" in line
    assert took < startup_s + 1.0, (took, startup_s)


def test_malformed_kubeconfig_in_inspect_is_one_line(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text(MALFORMED)
    out, _ = vgpu("inspect", "node", "n1", env={"KUBECONFIG": str(bad)})
    assert out.returncode == 2
    line = one_line(out)
    assert line.startswith("vgpu inspect: cannot load kubeconfig") and "(from KUBECONFIG)" in line and "line 4" in line


@pytest.mark.parametrize(
    ("args", "env", "expect"),
    [
        (
            ["plugin", "--node-name", "n1", "--handshake", "maybe"],
            {},
            "--handshake: must be one of auto, on, off (got 'maybe')",
        ),
        (["plugin", "--node-name", "n1"], {"VGPU_HANDSHAKE": "sometimes"}, "(got 'sometimes') [env VGPU_HANDSHAKE]"),
        (
            ["plugin", "--node-name", "n1", "--device-config", "/no/such/dir/device-config.yaml"],
            {},
            "directory /no/such/dir does not exist",
        ),
        (["plugin"], {}, "the node name is required"),
        (["monitor", "--node-name", "n1", "--listen", "nowhere"], {}, "--listen 'nowhere': expected HOST:PORT"),
        (["monitor", "--node-name", "n1", "--listen", "127.0.0.1:70000"], {}, "port 70000 is out of range"),
        (["monitor", "--node-name", "n1", "--listen", "127.0.0.1:0"], {}, "no kubeconfig given"),
    ],
)
def test_bad_settings_exit_2_within_a_second(args, env, expect, startup_s):
    out, took = vgpu(*args, env=env)
    assert out.returncode == 2, out.stderr
    assert expect in one_line(out)
    assert took < startup_s + 1.0, (took, startup_s)


def test_busy_port_is_found_before_the_pod_watch(good_kubeconfig, startup_s):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        out, took = vgpu(
            "monitor", "--node-name", "n1", "--listen", f"127.0.0.1:{port}", "--kubeconfig", str(good_kubeconfig)
        )
    assert out.returncode == 1
    assert f"--listen: 127.0.0.1:{port} is already in use" in one_line(out)
    assert took < startup_s + 1.0, (took, startup_s)


def test_mistyped_device_config_file_is_a_warning_naming_it(tmp_path):
    """A missing file in an existing directory: one WARNING naming the path before start-up; the
    plugin then runs on built-in defaults (and stops here at NVML, which this test points nowhere)."""
    missing = tmp_path / "device-confg.yaml"
    out, _ = vgpu(
        "plugin",
        "--node-name",
        "n1",
        "--device-config",
        str(missing),
        "--nvml-library",
        str(tmp_path / "no-libnvidia-ml.so.1"),
    )
    assert out.returncode == 1
    lines = out.stderr.splitlines()
    warning = [ln for ln in lines if "WARNING" in ln and str(missing) in ln]
    assert warning and "does not exist; running on built-in defaults" in warning[0], out.stderr
    assert lines.index(warning[0]) < next(i for i, ln in enumerate(lines) if "NVML" in ln)


@pytest.mark.parametrize(
    "args",
    [
        ["--log-level", "debug", "--log-format", "json", "plugin", "--node-name", "n1", "--handshake", "x"],
        ["plugin", "--log-level", "Debug", "--log-format", "JSON", "--node-name", "n1", "--handshake", "x"],
        ["--log-format", "text", "plugin", "--log-format", "json", "--node-name", "n1", "--handshake", "x"],
    ],
)
def test_log_flags_before_or_after_the_subcommand(args):
    out, _ = vgpu(*args)
    assert out.returncode == 2
    doc = json.loads(one_line(out))
    assert doc["level"] == "ERROR" and doc["logger"] == "vgpu.plugin.command"
    assert "--handshake: must be one of" in doc["message"]
    assert doc["timestamp"].endswith("Z") and "T" in doc["timestamp"]


def test_log_settings_from_env_and_their_errors():
    out, _ = vgpu("plugin", "--node-name", "n1", "--handshake", "x", env={"VGPU_LOG_FORMAT": "json"})
    assert json.loads(one_line(out))["level"] == "ERROR"
    out, _ = vgpu("plugin", "--node-name", "n1", "--handshake", "x", env={"VGPU_LOG_LEVEL": "critical"})
    assert out.returncode == 2 and out.stderr == ""  # the ERROR line is below CRITICAL
    out, _ = vgpu("plugin", "--node-name", "n1", env={"VGPU_LOG_LEVEL": "loud"})
    assert out.returncode == 2
    assert (
        one_line(out)
        == "vgpu: VGPU_LOG_LEVEL: 'loud' is not a log level (one of DEBUG, INFO, WARNING, ERROR, CRITICAL, any case)"
    )
    out, _ = vgpu("monitor", "--log-format", "xml")
    assert out.returncode == 2
    assert "argument --log-format: 'xml' is not a log format (one of text, json)" in out.stderr


def test_help_shows_metavars_defaults_and_env():
    out, _ = vgpu("plugin", "--help")
    text = " ".join(out.stdout.split())
    assert "--nvml-library PATH" in text and "VGPU_NVML_LIBRARY" in text
    assert "--nvml-library VGPU_NVML_LIBRARY" not in text
    assert "--kubeconfig PATH" in text and "default the in-cluster service account" in text
    assert "no default" not in text.split("--kubeconfig PATH")[1].split("--hook-path")[0]
    assert "--handshake auto|on|off" in text and "default auto" in text
    assert "[env VGPU_LOG_LEVEL; default INFO]" in text and "[env VGPU_LOG_FORMAT; default text]" in text
    mon = " ".join(vgpu("monitor", "--help")[0].stdout.split())
    assert "--listen HOST:PORT" in mon and "default 0.0.0.0:9394" in mon
    assert "Device_*) (default on)" in mon and "hami_* families (default on)" in mon
