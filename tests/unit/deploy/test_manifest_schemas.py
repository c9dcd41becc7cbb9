"""Every rendered manifest validates against the Kubernetes 1.30+ OpenAPI schemas.

kubernetes-validate ships the schemas in the package (no network).  Strict mode rejects unknown
fields, so a typo such as ``readinesProbe`` fails instead of being silently dropped by the API
server.  The ServiceMonitor is a CRD without a shipped schema; its own test checks it against the
Service it must select.
"""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest
from kubernetes_validate.utils import all_versions
from packaging.version import Version

from vgpu.monitor import families
from vgpu.plugin import metrics as plugin_metrics

from . import manifests as m

MIN_VERSION = Version("1.30")
VERSIONS = [v for v in all_versions() if Version(v) >= MIN_VERSION]
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor")}


def _validate_all(docs, version: str) -> list[str]:
    checked = []
    for doc in docs:
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return checked


def test_schemas_cover_kubernetes_1_30_and_later():
    assert VERSIONS, "kubernetes-validate ships no schema for Kubernetes >= 1.30"
    assert VERSIONS[0].startswith("1.30")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("kustomization", ["base", *m.OVERLAYS])
def test_rendered_kustomization_validates(kustomization, version):
    docs = m.render(kustomization)
    checked = _validate_all(docs, version)
    assert {
        "ServiceAccount/volcano-device-plugin",
        "ClusterRole/volcano-device-plugin",
        "ClusterRoleBinding/volcano-device-plugin",
        "ConfigMap/volcano-vgpu-device-config",
        "ConfigMap/volcano-vgpu-node-config",
        "DaemonSet/volcano-device-plugin",
        "Service/volcano-device-plugin-metrics",
    } == set(checked)


@pytest.mark.parametrize("version", [VERSIONS[0], VERSIONS[-1]])
def test_scheduler_configmap_validates(version):
    docs = m.load_docs(m.SCHEDULER_CONFIGMAP.read_text())
    assert _validate_all(docs, version) == ["ConfigMap/volcano-scheduler-configmap"]


def test_strict_validation_rejects_a_misspelt_field():
    """Negative control: the validator is not vacuous."""
    ds = copy.deepcopy(m.daemonset(m.single_file_docs()))
    ds["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"periodSeconds": 5}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, VERSIONS[-1], strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_admission_guardrails_validate(version):
    """deploy/optional/admission: admissionregistration.k8s.io/v1 (GA in 1.30), strict."""
    docs = m.render(m.ADMISSION)
    assert sorted(_validate_all(docs, version)) == [
        "ValidatingAdmissionPolicy/vgpu-allocation-annotations",
        "ValidatingAdmissionPolicy/vgpu-privileged-containers",
        "ValidatingAdmissionPolicyBinding/vgpu-allocation-annotations",
        "ValidatingAdmissionPolicyBinding/vgpu-privileged-containers",
    ]
    for doc in docs:
        assert "namespace" not in doc["metadata"], "cluster-scoped objects"


def test_strict_validation_rejects_a_misspelt_policy_field():
    """Negative control for the guardrails' schema check."""
    policy = copy.deepcopy(m.find(m.render(m.ADMISSION), "ValidatingAdmissionPolicy", "vgpu-privileged-containers"))
    policy["spec"]["validations"][0]["expresion"] = policy["spec"]["validations"][0].pop("expression")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(policy, VERSIONS[-1], strict=True)


def test_everything_namespaced_lives_in_kube_system():
    for kustomization in ["base", *m.OVERLAYS, m.SERVICEMONITOR]:
        for doc in m.render(kustomization):
            if doc["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                assert "namespace" not in doc["metadata"]
            else:
                assert doc["metadata"].get("namespace") == m.NAMESPACE, (kustomization, doc["kind"])


def test_servicemonitor_selects_the_metrics_service_and_keeps_workload_labels():
    sm = m.find(m.render(m.SERVICEMONITOR), "ServiceMonitor", "volcano-device-plugin")
    svc = m.find(m.single_file_docs(), "Service", "volcano-device-plugin-metrics")
    labels = svc["metadata"]["labels"]
    assert sm["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert sm["spec"]["namespaceSelector"]["matchNames"] == [svc["metadata"]["namespace"]]
    endpoints = {e["port"]: e for e in sm["spec"]["endpoints"]}
    assert set(endpoints) == {p["name"] for p in svc["spec"]["ports"]} == {"metrics", "plugin-metrics"}
    assert {e["path"] for e in endpoints.values()} == {"/metrics"}
    # The container families carry namespace/pod/container of the WORKLOAD: they must win.
    assert endpoints["metrics"]["honorLabels"] is True
    # The plugin's families carry none of the target's labels: the target's own win.
    assert endpoints["plugin-metrics"]["honorLabels"] is False


# What the prometheus-operator and the ServiceMonitor's relabeling attach to every target.
TARGET_LABELS = {"job", "instance", "namespace", "service", "pod", "container", "endpoint", "node"}


def test_the_plugin_families_need_no_honor_labels():
    """honorLabels is false on the plugin's endpoint: that only keeps every label when no plugin
    family carries a label the target also has (else it would be renamed exported_*)."""
    for family in plugin_metrics.FAMILIES:
        assert TARGET_LABELS.isdisjoint(family.labels), family.name
    # The monitor's container families do carry them: its endpoint must honour them.
    assert {"namespace", "pod", "container"} <= set().union(*(f.labels for f in families.ALL))


def test_service_targets_the_monitor_and_the_plugin_ports():
    docs = m.single_file_docs()
    svc = m.find(docs, "Service", "volcano-device-plugin-metrics")
    ds = m.daemonset(docs)
    assert svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    ports = {p["name"]: p for p in svc["spec"]["ports"]}
    for container, name, number in (("monitor", "metrics", 9394), ("plugin", "plugin-metrics", 9395)):
        container_ports = {p["name"]: p["containerPort"] for p in m.container(ds, container)["ports"]}
        assert ports[name]["port"] == number and container_ports[ports[name]["targetPort"]] == number
