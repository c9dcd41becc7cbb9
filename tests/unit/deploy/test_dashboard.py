"""deploy/helm/volcano-vgpu/files/vgpu-dashboard.json: a well-formed Grafana dashboard whose queries name only
families the monitor or the plugin declares.  The integration test tests/integration/deploy compares
the same names with real scrapes of `vgpu monitor` and `vgpu plugin`."""

from __future__ import annotations

import json

import pytest

from vgpu.monitor import families
from vgpu.plugin import metrics as plugin_metrics

from . import manifests as m
from .promql import metric_names


def dashboard() -> dict:
    return json.loads(m.DASHBOARD.read_text())


def queries(dash: dict) -> list[str]:
    """Every PromQL expression and template query in the dashboard."""
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            out.append(t["expr"])
        for sub in panel.get("panels", []):
            out.extend(t["expr"] for t in sub.get("targets", []))
    for var in dash["templating"]["list"]:
        if var["type"] == "query":
            out.append(var["query"]["query"] if isinstance(var["query"], dict) else var["query"])
    return out


def queried_metrics(dash: dict | None = None) -> set[str]:
    return set().union(*(metric_names(q) for q in queries(dash or dashboard())))


@pytest.mark.parametrize(
    "expr, names",
    [
        ('hami_host_gpu_memory_used_bytes{node=~"$node"}', {"hami_host_gpu_memory_used_bytes"}),
        ('sum by (namespace, pod) (rate(foo_total{a="b(c)"}[5m]))', {"foo_total"}),
        ("histogram_quantile(0.99, sum by (le) (rate(x_bucket[$__rate_interval])))", {"x_bucket"}),
        ('a + on(device_uuid) group_left(node) (0 * b{node=~"$node"})', {"a", "b"}),
        ("a / (b > 0) and on() vector(1) offset 5m", {"a", "b"}),
        ('label_values(m1{namespace=~"$namespace"}, pod)', {"m1"}),
        ("count(up) * 1e3 - 2", {"up"}),
    ],
)
def test_metric_name_extraction(expr, names):
    assert metric_names(expr) == names


def test_dashboard_is_well_formed():
    dash = dashboard()
    assert dash["uid"] and dash["title"] and dash["schemaVersion"] >= 36
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    for panel in dash["panels"]:
        g = panel["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(ref_ids) == len(set(ref_ids))
    for q in queries(dash):
        assert q.count("(") == q.count(")") and q.count("{") == q.count("}") and q.count("[") == q.count("]"), q
        for ref in ("$node", "$namespace", "$pod"):
            if ref in q:
                assert ref[1:] in variables


def test_dashboard_covers_the_required_views():
    names = queried_metrics()
    required = {
        "per-node GPU memory": "hami_host_gpu_memory_used_bytes",
        "per-node GPU utilization": "hami_host_gpu_utilization_ratio",
        "per-pod memory used": "hami_vgpu_memory_used_bytes",
        "per-pod memory limit": "hami_vgpu_memory_limit_bytes",
        "SM utilization": "hami_container_device_utilization_ratio",
        "last-kernel age": "hami_container_last_kernel_elapsed_seconds",
        "monitor scrape duration": "vgpu_monitor_scrape_duration_seconds_bucket",
    }
    missing = {view: name for view, name in required.items() if name not in names}
    assert not missing, missing


def plugin_sample_names() -> set[str]:
    """Sample names of the plugin's families (docs/metrics.md §10): a histogram's _bucket, _sum, _count."""
    out = set()
    for f in plugin_metrics.FAMILIES:
        out |= {f.name + x for x in ("_bucket", "_sum", "_count")} if f.type == "histogram" else {f.name}
    return out


def test_dashboard_names_only_declared_families():
    declared = {f.name for f in families.ALL} | plugin_sample_names()
    for name in queried_metrics():
        assert name in declared or name.startswith("vgpu_monitor_"), f"{name} is not a monitor or plugin family"
