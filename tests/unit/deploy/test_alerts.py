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
from vgpu.monitor import families
from vgpu.plugin import metrics as plugin_metrics
from vgpu.plugin.responses import FAILURE_REASONS

from . import chart as c
from . import manifests as m
from .promql import metric_names

OPERATIONS = m.REPO / "docs" / "operations.md"
JOB = "volcano-device-plugin-metrics"
MONITOR_AT = "10.0.0.1:9394"
PLUGIN_AT = "10.0.0.1:9395"


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
    # The prometheus-operator labels each target with the ServiceMonitor endpoint's port name.
    "VgpuMonitorDown": (
        [
            {"series": _s("up", job=JOB, endpoint="metrics", instance=MONITOR_AT), "values": "1 0x20"},
            # The plugin's target on the same job is down too: that is VgpuPluginDown, not this.
            {"series": _s("up", job=JOB, endpoint="plugin-metrics", instance=PLUGIN_AT), "values": "1 0x20"},
        ],
        [("3m", []), ("10m", [{"instance": MONITOR_AT, "job": JOB, "endpoint": "metrics"}])],
    ),
    "VgpuMonitorAbsent": (
        [
            {"series": _s("up", job="something-else", endpoint="metrics"), "values": "1x30"},
            # Only the plugin's targets are scraped: the monitor is still absent.
            {"series": _s("up", job=JOB, endpoint="plugin-metrics", instance=PLUGIN_AT), "values": "1x30"},
        ],
        [("20m", [{"job": JOB, "endpoint": "metrics"}])],
    ),
    "VgpuPluginDown": (
        [
            {"series": _s("up", job=JOB, endpoint="plugin-metrics", instance=PLUGIN_AT), "values": "1 0x20"},
            {"series": _s("up", job=JOB, endpoint="metrics", instance=MONITOR_AT), "values": "1 0x20"},
            {"series": _s("up", job=JOB, endpoint="plugin-metrics", instance="10.0.0.2:9395"), "values": "1x21"},
        ],
        [("3m", []), ("10m", [{"instance": PLUGIN_AT, "job": JOB, "endpoint": "plugin-metrics"}])],
    ),
    "VgpuPluginAbsent": (
        [{"series": _s("up", job=JOB, endpoint="metrics", instance=MONITOR_AT), "values": "1x30"}],
        [("10m", []), ("20m", [{"job": JOB, "endpoint": "plugin-metrics"}])],
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
            # The scheduler over-committed a GPU (docs/metrics.md §10.1): a failure like any other.
            {
                "series": _s(
                    "vgpu_plugin_allocations_total",
                    node="n3",
                    resource="volcano.sh/vgpu-memory",
                    result="failure",
                    reason="overcommit",
                ),
                "values": "0 0 0 3 3 3 3 3 3 3 3 3",
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
        [
            ("1m", []),
            (
                "8m",
                [
                    {"node": "n1", "resource": "volcano.sh/vgpu-number", "reason": "unhealthy_gpu"},
                    {"node": "n3", "resource": "volcano.sh/vgpu-memory", "reason": "overcommit"},
                ],
            ),
        ],
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


def _alert_names(values: dict[str, Any]) -> set[str]:
    d = c.docs({"prometheusRule": {"enabled": True}, **values}, show_only=["templates/prometheusrule.yaml"])
    return {r["alert"] for g in m.find(d, "PrometheusRule", "volcano-vgpu")["spec"]["groups"] for r in g["rules"]}


TARGET_ALERTS = {
    "metrics": {"VgpuMonitorDown", "VgpuMonitorAbsent"},
    "plugin-metrics": {"VgpuPluginDown", "VgpuPluginAbsent"},
}


# The alerts on each daemon's families (VgpuNvmlDown reads both: it keeps the half that is scraped).
DAEMON_ALERTS = {
    "metrics": TARGET_ALERTS["metrics"] | {"VgpuNvmlErrors", "VgpuRegionFilesRejected", "VgpuNvmlSamplesStale"},
    "plugin-metrics": TARGET_ALERTS["plugin-metrics"] | {"VgpuGpuUnhealthy", "VgpuAllocationFailures"},
}
NO_MONITOR = {"monitor": {"enabled": False}}
NO_PLUGIN_METRICS = {"plugin": {"metrics": {"enabled": False}}}


def test_alerts_follow_the_scraped_daemons():
    """An alert on a daemon the chart does not expose could never fire (an Absent alert would
    fire forever), so it is left out."""
    everything = set(_alerts())
    assert everything == DAEMON_ALERTS["metrics"] | DAEMON_ALERTS["plugin-metrics"] | {"VgpuNvmlDown"}
    assert everything - _alert_names(NO_MONITOR) == DAEMON_ALERTS["metrics"]
    assert everything - _alert_names(NO_PLUGIN_METRICS) == DAEMON_ALERTS["plugin-metrics"]
    d = c.docs({"prometheusRule": {"enabled": True}, **NO_MONITOR, **NO_PLUGIN_METRICS})
    assert "PrometheusRule" not in {doc["kind"] for doc in d}


@pytest.mark.parametrize(
    "values, expr",
    [({}, "vgpu_monitor_nvml_up == 0 or vgpu_plugin_nvml_up == 0"), (NO_MONITOR, "vgpu_plugin_nvml_up == 0")]
    + [(NO_PLUGIN_METRICS, "vgpu_monitor_nvml_up == 0")],
)
def test_nvml_down_reads_the_scraped_daemons(values, expr):
    d = c.docs({"prometheusRule": {"enabled": True}, **values}, show_only=["templates/prometheusrule.yaml"])
    rule = m.find(d, "PrometheusRule", "volcano-vgpu")["spec"]["groups"][0]["rules"]
    assert {r["alert"]: r["expr"] for r in rule}["VgpuNvmlDown"] == expr


def test_target_alerts_select_the_service_monitor_endpoints():
    """The operator names the job after the Service and sets `endpoint` to the endpoint's port
    name: each target alert selects exactly one ServiceMonitor endpoint, one Service port."""
    d = c.docs({"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}})
    service = m.find(d, "Service", "volcano-device-plugin-metrics")
    ports = {p["name"] for p in service["spec"]["ports"]}
    endpoints = {e["port"] for e in m.find(d, "ServiceMonitor", "volcano-device-plugin")["spec"]["endpoints"]}
    assert ports == endpoints == set(TARGET_ALERTS)
    alerts = _alerts()
    for port, names in TARGET_ALERTS.items():
        for name in names:
            selector = f'up{{job="{service["metadata"]["name"]}",endpoint="{port}"}}'
            assert selector in alerts[name]["expr"], (name, alerts[name]["expr"])


def test_the_job_value_names_the_job_of_both_targets():
    groups = _groups({"job": "gpu-nodes"})
    exprs = {r["alert"]: r["expr"] for g in groups for r in g["rules"]}
    assert exprs["VgpuMonitorDown"] == 'up{job="gpu-nodes",endpoint="metrics"} == 0'
    assert exprs["VgpuPluginDown"] == 'up{job="gpu-nodes",endpoint="plugin-metrics"} == 0'


def test_the_allocation_failures_runbook_lists_every_reason():
    """The `reason` label of VgpuAllocationFailures is one of the plugin's failure reasons; the
    runbook says what each means (a new reason without an entry fails here)."""
    doc = OPERATIONS.read_text()
    entry = doc.split("\n### VgpuAllocationFailures\n", 1)[1].split("\n### ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", entry, re.M)) - {"reason"}  # less the header
    assert listed == set(FAILURE_REASONS)


def _served_on() -> dict[str, str]:
    """Family name -> the port of the daemon that serves it (Service/ServiceMonitor port names)."""
    out = {f.name: "metrics" for f in families.ALL}
    for f in plugin_metrics.FAMILIES:
        names = {f.name + x for x in ("_bucket", "_sum", "_count")} if f.type == "histogram" else {f.name}
        out |= dict.fromkeys(names, "plugin-metrics")
    return out


@pytest.mark.parametrize("values", [{}, NO_MONITOR, NO_PLUGIN_METRICS], ids=["both", "no-monitor", "no-plugin-metrics"])
def test_every_family_an_alert_reads_is_scraped(values):
    """An alert on a family no endpoint scrapes can never fire: each family an alert reads is
    served by a daemon whose port the ServiceMonitor scrapes (monitor self-metrics included)."""
    d = c.docs({"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}, **values})
    scraped = {e["port"] for e in m.find(d, "ServiceMonitor", "volcano-device-plugin")["spec"]["endpoints"]}
    served_on = _served_on()
    read = set()
    alerts = {r["alert"]: r for g in m.find(d, "PrometheusRule", "volcano-vgpu")["spec"]["groups"] for r in g["rules"]}
    for alert, rule in alerts.items():
        for name in metric_names(rule["expr"]) - {"up"}:
            port = "metrics" if name.startswith("vgpu_monitor_") else served_on.get(name)
            assert port is not None, f"{alert} reads {name}, which no daemon declares"
            assert port in scraped, f"{alert} reads {name} from port {port}, which the ServiceMonitor does not scrape"
            read.add(port)
    assert read == scraped  # and every scraped daemon has alerts
