"""The chart's PrometheusRule (prometheusRule.enabled): real promtool checks and unit tests of each alert.

``promtool check rules`` validates the rendered groups; ``promtool test rules`` feeds each alert
the series an operator would see and checks that it fires with the right labels, and that the
look-alikes that need no action (NVML answers unsupported by design, one old failure) stay quiet.
Every alert has a runbook entry in docs/operations.md §6 under its own name.
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.conftest import missing_program

from . import chart as c
from . import manifests as m

OPERATIONS = m.REPO / "docs" / "operations.md"
JOB = "volcano-device-plugin-metrics"


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing_program("promtool is not installed (Debian package prometheus; .ci/run installs it)")
    return path


@pytest.fixture(autouse=True)
def _helm() -> None:
    try:
        c.helm_path()
    except c.HelmMissing as exc:
        missing_program(str(exc))


def _groups(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    d = c.docs({"prometheusRule": {"enabled": True, **(values or {})}}, show_only=["templates/prometheusrule.yaml"])
    return m.find(d, "PrometheusRule", "volcano-vgpu")["spec"]["groups"]


def _alerts() -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in _groups() for r in g["rules"]}


def _promtool(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_promtool_check_rules_passes(tmp_path: pathlib.Path):
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": _groups()}))
    proc = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in proc.stdout + proc.stderr


def _s(name: str, **labels: str) -> str:
    """A promtool input series selector: name{label="value",...}."""
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}"


# Each alert: input series (1-minute steps), when to evaluate, and the alerts expected then.
CASES: dict[str, tuple[list[dict[str, str]], list[tuple[str, list[dict[str, str]]]]]] = {
    "VgpuMonitorDown": (
        [{"series": f'up{{job="{JOB}",instance="10.0.0.1:9394"}}', "values": "1 0x20"}],
        [("3m", []), ("10m", [{"instance": "10.0.0.1:9394", "job": JOB}])],
    ),
    "VgpuMonitorAbsent": (
        [{"series": _s("up", job="something-else"), "values": "1x30"}],
        [("20m", [{"job": JOB}])],
    ),
    "VgpuNvmlDown": (
        [
            {"series": _s("vgpu_monitor_nvml_up", node="n1"), "values": "0x20"},
            {"series": _s("vgpu_monitor_nvml_up", node="n2"), "values": "1x20"},
            {"series": _s("vgpu_plugin_nvml_up", node="n3"), "values": "0x20"},
        ],
        [("5m", []), ("15m", [{"node": "n1"}, {"node": "n3"}])],
    ),
    "VgpuNvmlErrors": (
        [
            {
                "series": _s(
                    "vgpu_monitor_nvml_errors_total",
                    node="n1",
                    device_index="0",
                    call="memory",
                    code="NVML_ERROR_GPU_IS_LOST",
                ),
                "values": "0+1x40",
            },
            # By design (utilization on a MIG-enabled GPU): never an alert.
            {
                "series": _s(
                    "vgpu_monitor_nvml_errors_total",
                    node="n1",
                    device_index="1",
                    call="utilization",
                    code="NVML_ERROR_NOT_SUPPORTED",
                ),
                "values": "0+1x40",
            },
        ],
        [("30m", [{"node": "n1", "device_index": "0", "call": "memory", "code": "NVML_ERROR_GPU_IS_LOST"}])],
    ),
    "VgpuGpuUnhealthy": (
        [
            {"series": _s("vgpu_gpu_healthy", node="n1", uuid="GPU-a", index="0"), "values": "1 1 0x10"},
            {"series": _s("vgpu_gpu_healthy", node="n1", uuid="GPU-b", index="1"), "values": "1x12"},
        ],
        [("5m", [{"node": "n1", "uuid": "GPU-a", "index": "0"}])],
    ),
    "VgpuAllocationFailures": (
        [
            {
                "series": _s(
                    "vgpu_plugin_allocations_total",
                    node="n1",
                    resource="volcano.sh/vgpu-number",
                    result="failure",
                    reason="unhealthy_gpu",
                ),
                "values": "0 0 1 2 3 4 5 5 5 5 5 5",
            },
            # One failure a while ago on another node: no alert.
            {
                "series": _s(
                    "vgpu_plugin_allocations_total",
                    node="n2",
                    resource="volcano.sh/vgpu-number",
                    result="failure",
                    reason="api_error",
                ),
                "values": "0 1 1 1 1 1 1 1 1 1 1 1",
            },
            {
                "series": _s(
                    "vgpu_plugin_allocations_total",
                    node="n2",
                    resource="volcano.sh/vgpu-number",
                    result="success",
                    reason="",
                ),
                "values": "0+10x11",
            },
        ],
        [("1m", []), ("8m", [{"node": "n1", "resource": "volcano.sh/vgpu-number", "reason": "unhealthy_gpu"}])],
    ),
    "VgpuRegionFilesRejected": (
        [
            {"series": _s("vgpu_monitor_files_rejected_total", node="n1", reason="symlink"), "values": "0 0 1 1 1"},
            {"series": _s("vgpu_monitor_files_rejected_total", node="n2", reason="symlink"), "values": "0 0 0 0 0"},
        ],
        [("4m", [{"node": "n1", "reason": "symlink"}])],
    ),
    "VgpuNvmlSamplesStale": (
        [
            {
                "series": _s("vgpu_monitor_nvml_sample_age_seconds", node="n1"),
                "values": "1 1 100 160 220 280 340 400 460 520",
            },
            {"series": _s("vgpu_monitor_nvml_sample_age_seconds", node="n2"), "values": "1x10"},
        ],
        [("3m", []), ("8m", [{"node": "n1"}])],
    ),
}


def test_every_alert_has_a_case_and_a_runbook_entry():
    assert set(CASES) == set(_alerts())
    doc = OPERATIONS.read_text()
    section = doc.split("\n## 6. ", 1)[1].split("\n## ", 1)[0]
    for name, rule in _alerts().items():
        assert re.search(rf"^### {name}$", section, re.M), f"docs/operations.md §6 has no runbook for {name}"
        assert rule["annotations"]["runbook_url"] == f"docs/operations.md#{name.lower()}"
        assert rule["labels"]["severity"] in ("warning", "critical")


@pytest.mark.parametrize("alert", sorted(CASES))
def test_alert_fires_for_what_it_names(alert, tmp_path: pathlib.Path):
    # Annotations are templates of the alert's own labels; the unit test compares labels only.
    groups = _groups()
    for g in groups:
        for r in g["rules"]:
            r.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    severity = _alerts()[alert]["labels"]["severity"]
    series, evals = CASES[alert]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": series,
                "alert_rule_test": [
                    {
                        "eval_time": at,
                        "alertname": alert,
                        "exp_alerts": [{"exp_labels": {**labels, "severity": severity}} for labels in expected],
                    }
                    for at, expected in evals
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    proc = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
