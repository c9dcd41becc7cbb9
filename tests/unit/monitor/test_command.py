"""`vgpu monitor` flags: flag > env > default (docs/configuration.md §5.2), and clear startup errors."""

from __future__ import annotations

import pytest

from vgpu.cli import build_parser, main
from vgpu.cli.monitor import resolve
from vgpu.httpserve import ListenAddressError, parse_listen


def args(*argv: str):
    return build_parser().parse_args(["monitor", *argv])


def test_defaults():
    o = resolve(args(), {"NODE_NAME": "n1"})
    assert (o.listen, o.hook_path, o.node_name, o.kubeconfig, o.nvml_library, o.device_config) == (
        "0.0.0.0:9394",
        "/usr/local/vgpu",
        "n1",
        None,
        None,
        "/config/device-config.yaml",
    )
    assert o.legacy_metrics and o.hami_metrics


def test_flag_beats_env_beats_default():
    env = {
        "NODE_NAME": "env-node",
        "HOOK_PATH": "/env/hook",
        "VGPU_LISTEN": "127.0.0.1:1",
        "KUBECONFIG": "/env/kc",
        "VGPU_NVML_LIBRARY": "/env/libnvml.so",
        "DEVICE_CONFIG": "/env/dc.yaml",
    }
    o = resolve(args("--node-name", "flag-node", "--listen", "127.0.0.1:2"), env)
    assert (o.node_name, o.listen, o.hook_path, o.kubeconfig, o.nvml_library, o.device_config) == (
        "flag-node",
        "127.0.0.1:2",
        "/env/hook",
        "/env/kc",
        "/env/libnvml.so",
        "/env/dc.yaml",
    )


def test_families_can_be_turned_off():
    o = resolve(args("--no-legacy-metrics", "--no-hami-metrics"), {"NODE_NAME": "n"})
    assert not o.legacy_metrics and not o.hami_metrics


def test_node_name_is_required(monkeypatch, caplog):
    monkeypatch.delenv("NODE_NAME", raising=False)
    assert main(["monitor"]) == 2
    assert "node name is required" in caplog.text


def test_missing_kubeconfig_is_a_clear_startup_error(monkeypatch, caplog, tmp_path):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["monitor", "--node-name", "n", "--kubeconfig", str(tmp_path / "nope")]) == 2
    assert "cannot load kubeconfig" in caplog.text


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0.0.0.0:9394", ("0.0.0.0", 9394)),
        (":9394", ("0.0.0.0", 9394)),
        ("[::]:9394", ("::", 9394)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
    ],
)
def test_parse_listen(value, expected):
    assert parse_listen(value) == expected


@pytest.mark.parametrize("value", ["9394", "host:port", "1.2.3.4:70000"])
def test_parse_listen_rejects(value):
    with pytest.raises(ListenAddressError, match="--listen"):
        parse_listen(value)
