"""The Helm chart deploy/helm/volcano-vgpu, rendered by the real helm v4 (``make helm``).

- ``helm lint --strict`` passes, with the defaults and with every optional piece on;
- the chart version and appVersion are the package version;
- the committed static manifests are exactly what the chart renders (``make manifests``), and the
  default render is the objects of deploy/volcano-vgpu-device-plugin.yml;
- the kustomize overlays and the chart agree (mig-values.yaml, ``handshake=on``);
- every value of values.yaml has a case below that renders it and checks its effect (the cases
  are checked against the values file, so a new value without a case fails);
- every object of every rendered variant validates strictly against the Kubernetes 1.30 and the
  newest schemas kubernetes-validate ships.
"""

from __future__ import annotations

import copy
import json
import pathlib
import tarfile
import tomllib
from collections.abc import Callable
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.conftest import missing_program
from vgpu.cli import build_parser
from vgpu.config.loader import parse_device_config, parse_node_config
from vgpu.config.model import MODE_MIG
from vgpu.kube.registrar import HandshakeMode

from . import chart as c
from . import manifests as m
from .test_daemonset_cli import _argv, _environ, _resolve
from .test_manifest_schemas import VERSIONS

Docs = list[dict[str, Any]]
MIG_VALUES = m.DEPLOY / "helm" / "mig-values.yaml"
DEFAULTS: dict[str, Any] = yaml.safe_load((c.CHART / "values.yaml").read_text())
# Values whose value is a free-form map or list (the leaf is the key itself).
FREE_FORM = {
    "nodeSelector",
    "affinity",
    "tolerations",
    "updateStrategy",
    "podAnnotations",
    "podLabels",
    "podSecurityContext",
    "image.pullSecrets",
    "plugin.cdi.specDirs",
    "plugin.extraArgs",
    "plugin.extraEnv",
    "plugin.resources",
    "plugin.securityContext",
    "monitor.extraArgs",
    "monitor.extraEnv",
    "monitor.resources",
    "monitor.securityContext",
    "serviceMonitor.labels",
    "prometheusRule.labels",
    "dashboard.labels",
    "dashboard.annotations",
}


@pytest.fixture(autouse=True)
def _helm() -> None:
    try:
        c.helm_path()
    except c.HelmMissing as exc:
        missing_program(str(exc))


def _leaves(tree: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and path not in FREE_FORM:
            out |= _leaves(value, path + ".")
        else:
            out.add(path)
    return out


def ds(docs: Docs) -> dict[str, Any]:
    return m.daemonset(docs)


def pod(docs: Docs) -> dict[str, Any]:
    return ds(docs)["spec"]["template"]["spec"]


def ctr(docs: Docs, name: str = "plugin") -> dict[str, Any]:
    return m.container(ds(docs), name)


def env(docs: Docs, name: str = "plugin") -> dict[str, str]:
    return m.plain_env(ctr(docs, name))


def opts(docs: Docs, name: str = "plugin") -> Any:
    """The container's settings as the real `vgpu` parser and resolver see them."""
    k = ctr(docs, name)
    return _resolve(name, _argv(k), _environ(k))


def kinds(docs: Docs) -> set[str]:
    return {d["kind"] for d in docs}


def rules(docs: Docs) -> dict[str, dict[str, Any]]:
    rule = m.find(docs, "PrometheusRule", "volcano-vgpu")
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


# -- every value: (values, check of the rendered objects) ------------------------------------------

SOCKET_PROBE = "test -S /var/lib/kubelet/device-plugins/nvidia-vgpu-number.sock"


def _image(d: Docs) -> None:
    assert {k["image"] for k in pod(d)["containers"]} == {"registry.example/gpu/vgpu:9.9.9"}


def _digest(d: Docs) -> None:
    assert {k["image"] for k in pod(d)["containers"]} == {"registry.example/gpu/vgpu@sha256:" + "a" * 64}


def _cdi(d: Docs) -> None:
    e = env(d)
    assert e["DEVICE_LIST_STRATEGY"] == "cdi-cri,envvar"
    assert e["CDI_SPEC_DIRS"] == "/etc/cdi,/run/cdi"
    assert (e["CDI_ANNOTATION_PREFIX"], e["CDI_DEVICE_NAME_STRATEGY"], e["CDI_KIND"]) == (
        "cdi.example/",
        "index",
        "example.com/gpu",
    )
    for path in ("/etc/cdi", "/run/cdi"):
        mount, vol = m.mount_for(ds(d), ctr(d), path)
        assert mount["mountPath"] == path == vol["hostPath"]["path"] and mount["readOnly"] is True


def _no_cdi_by_default(d: Docs) -> None:
    assert not {k for k in env(d) if k.startswith("CDI_") or k == "DEVICE_LIST_STRATEGY"}
    assert m.mount_for(ds(d), ctr(d), "/etc/cdi") is None


def _plugin_metrics(d: Docs) -> None:
    k = ctr(d)
    assert env(d)["VGPU_METRICS_LISTEN"] == "0.0.0.0:9400"
    assert k["ports"] == [{"name": "plugin-metrics", "containerPort": 9400, "protocol": "TCP"}]
    assert k["startupProbe"]["httpGet"] == {"path": "/livez", "port": "plugin-metrics"}
    assert k["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "plugin-metrics"}
    assert k["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "plugin-metrics"}


def _socket_probes(d: Docs) -> None:
    k = ctr(d)
    assert "ports" not in k and "VGPU_METRICS_LISTEN" not in env(d)
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert SOCKET_PROBE in k[probe]["exec"]["command"][2]


def _mig(d: Docs) -> None:
    plugin, monitor = ctr(d), ctr(d, "monitor")
    assert plugin["securityContext"]["privileged"] is True
    assert monitor["securityContext"]["capabilities"]["add"] == ["DAC_OVERRIDE", "SYS_ADMIN"]
    assert env(d)["NVIDIA_MIG_MONITOR_DEVICES"] == env(d, "monitor")["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


def _no_monitor(d: Docs) -> None:
    assert [k["name"] for k in pod(d)["containers"]] == ["plugin"]
    assert {v["name"] for v in pod(d)["volumes"]}.isdisjoint({"device-config", "monitor-tmp"})
    assert "Service" not in kinds(d) and "ServiceMonitor" not in kinds(d)


def _monitor_port(d: Docs) -> None:
    assert opts(d, "monitor").listen == "0.0.0.0:9500"
    assert ctr(d, "monitor")["ports"][0]["containerPort"] == 9500
    assert m.find(d, "Service", "volcano-device-plugin-metrics")["spec"]["ports"][0]["port"] == 9500


def _service_monitor(d: Docs) -> None:
    sm = m.find(d, "ServiceMonitor", "volcano-device-plugin")
    assert sm["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (ep,) = sm["spec"]["endpoints"]
    assert (ep["interval"], ep["scrapeTimeout"], ep["honorLabels"]) == ("30s", "10s", True)


def _prometheus_rule(d: Docs) -> None:
    r = rules(d)
    assert m.find(d, "PrometheusRule", "volcano-vgpu")["metadata"]["labels"]["release"] == "kps"
    assert r["VgpuMonitorDown"]["expr"] == 'up{job="gpu-metrics"} == 0'
    assert r["VgpuAllocationFailures"]["expr"].endswith(">= 7")
    assert r["VgpuNvmlSamplesStale"]["expr"] == "vgpu_monitor_nvml_sample_age_seconds > 120"


def _dashboard(d: Docs) -> None:
    cm = m.find(d, "ConfigMap", "volcano-vgpu-dashboard")
    assert cm["metadata"]["namespace"] == "monitoring"
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "yes"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "GPU"}
    assert json.loads(cm["data"]["vgpu-dashboard.json"]) == json.loads(m.DASHBOARD.read_text())


def _admission(d: Docs) -> None:
    policies = {p["metadata"]["name"]: p for p in d if p["kind"] == "ValidatingAdmissionPolicy"}
    assert set(policies) == {"vgpu-allocation-annotations", "vgpu-privileged-containers"}
    assert {b["spec"]["policyName"] for b in d if b["kind"] == "ValidatingAdmissionPolicyBinding"} == set(policies)
    variables = {v["name"]: v["expression"] for v in policies["vgpu-allocation-annotations"]["spec"]["variables"]}
    assert "'system:serviceaccount:sched:volcano'" in variables["writers"]
    assert "'system:serviceaccount:kube-system:volcano-device-plugin'" in variables["writers"]
    variables = {v["name"]: v["expression"] for v in policies["vgpu-privileged-containers"]["spec"]["variables"]}
    assert variables["resourcePrefix"] == "'example.com/vgpu-'"


CUSTOM_DEVICE_CONFIG = "nvidia:\n  deviceSplitCount: 4\n  gpuMemoryFactor: 1024\n"
CUSTOM_NODE_CONFIG = '{"nodeconfig": [{"name": "n1", "operatingmode": "mig", "devicesplitcount": 7}]}\n'


def _device_config(d: Docs) -> None:
    text = m.configmap_data(d, "volcano-vgpu-device-config")["device-config.yaml"]
    cfg, warnings = parse_device_config(text, "device-config.yaml")
    assert warnings == [] and cfg.device_split_count == 4 and cfg.gpu_memory_factor == 1024


def _node_config(d: Docs) -> None:
    text = m.configmap_data(d, "volcano-vgpu-node-config")["config.json"]
    node, _ = parse_node_config(text, "config.json", "n1")
    assert node.operating_mode == MODE_MIG and node.device_split_count == 7


CASES: dict[str, tuple[dict[str, Any], Callable[[Docs], None]]] = {
    "image": ({"image": {"repository": "registry.example/gpu/vgpu", "tag": "9.9.9"}}, _image),
    "image-pull-policy": (
        {"image": {"pullPolicy": "Always"}},
        lambda d: _check({k["imagePullPolicy"] for k in pod(d)["containers"]} == {"Always"}),
    ),
    "image-digest": (
        {"image": {"repository": "registry.example/gpu/vgpu", "tag": "9.9.9", "digest": "sha256:" + "a" * 64}},
        _digest,
    ),
    "image-pull-secrets": (
        {"image": {"pullSecrets": [{"name": "regcred"}]}},
        lambda d: _check(pod(d)["imagePullSecrets"] == [{"name": "regcred"}]),
    ),
    "node-selector": (
        # helm merges maps with the defaults: a key set to null drops the default one
        {"nodeSelector": {"nvidia.com/gpu.present": None, "pool": "gpu"}},
        lambda d: _check(pod(d)["nodeSelector"] == {"pool": "gpu"}),
    ),
    "affinity": (
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["a100"]}]}
                        ]
                    }
                }
            }
        },
        lambda d: _check("nodeAffinity" in pod(d)["affinity"]),
    ),
    "tolerations": (
        {"tolerations": [{"key": "gpu", "operator": "Exists"}]},
        lambda d: _check(pod(d)["tolerations"] == [{"key": "gpu", "operator": "Exists"}]),
    ),
    "runtime-class": (
        {"runtimeClassName": "nvidia", "runtimeClass": {"create": True, "handler": "nvidia-cdi"}},
        lambda d: _check(
            pod(d)["runtimeClassName"] == "nvidia" and m.find(d, "RuntimeClass", "nvidia")["handler"] == "nvidia-cdi"
        ),
    ),
    "priority-class": (
        {"priorityClassName": "gpu-critical"},
        lambda d: _check(pod(d)["priorityClassName"] == "gpu-critical"),
    ),
    "termination-grace": (
        {"terminationGracePeriodSeconds": 60},
        lambda d: _check(pod(d)["terminationGracePeriodSeconds"] == 60),
    ),
    "update-strategy": (
        {"updateStrategy": {"rollingUpdate": {"maxUnavailable": "10%"}}},
        lambda d: _check(
            ds(d)["spec"]["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "10%"}}
        ),
    ),
    "pod-metadata": (
        {"podAnnotations": {"a": "1"}, "podLabels": {"team": "ml"}},
        lambda d: _check(
            ds(d)["spec"]["template"]["metadata"]["annotations"] == {"a": "1"}
            and ds(d)["spec"]["template"]["metadata"]["labels"]["team"] == "ml"
            and ds(d)["spec"]["selector"] == {"matchLabels": {"name": "volcano-device-plugin"}}
        ),
    ),
    "pod-security-context": (
        {"podSecurityContext": {"fsGroup": 0}},
        lambda d: _check(pod(d)["securityContext"] == {"fsGroup": 0}),
    ),
    "fail-on-init-error": (
        {"failOnInitError": True},
        lambda d: _check(opts(d).fail_on_init_error is True and opts(d, "monitor").fail_on_init_error is True),
    ),
    "log": (
        {"log": {"level": "DEBUG", "format": "json"}},
        lambda d: _check(
            build_parser().parse_args(_argv(ctr(d))).log_level == "DEBUG"
            and env(d)["VGPU_LOG_FORMAT"] == env(d, "monitor")["VGPU_LOG_FORMAT"] == "json"
        ),
    ),
    "handshake": (
        {"handshake": "on"},
        lambda d: _check(HandshakeMode.parse(opts(d).handshake) is HandshakeMode.ON),
    ),
    "mig": ({"mig": {"enabled": True}}, _mig),
    "cdi": (
        {
            "plugin": {
                "deviceListStrategy": "cdi-cri,envvar",
                "cdi": {
                    "annotationPrefix": "cdi.example/",
                    "deviceNameStrategy": "index",
                    "kind": "example.com/gpu",
                    "specDirs": ["/etc/cdi", "/run/cdi"],
                },
            }
        },
        _cdi,
    ),
    "unhealthy-gpu-policy": (
        {"plugin": {"unhealthyGpuPolicy": "report"}},
        lambda d: _check(env(d)["UNHEALTHY_GPU_POLICY"] == "report"),
    ),
    "plugin-metrics": ({"plugin": {"metrics": {"enabled": True, "port": 9400}}}, _plugin_metrics),
    "plugin-extra": (
        {
            "plugin": {
                "extraArgs": ["--handshake", "off"],
                "extraEnv": [{"name": "DP_DISABLE_HEALTHCHECKS", "value": "xids"}],
            }
        },
        lambda d: _check(
            HandshakeMode.parse(opts(d).handshake) is HandshakeMode.OFF and env(d)["DP_DISABLE_HEALTHCHECKS"] == "xids"
        ),
    ),
    "plugin-resources": (
        {"plugin": {"resources": {"limits": {"memory": "1Gi"}}}},
        lambda d: _check(ctr(d)["resources"]["limits"]["memory"] == "1Gi"),
    ),
    "plugin-security-context": (
        {"plugin": {"securityContext": {"privileged": True}}},
        lambda d: _check(ctr(d)["securityContext"] == {"privileged": True}),
    ),
    "monitor-disabled": ({"monitor": {"enabled": False}, "serviceMonitor": {"enabled": True}}, _no_monitor),
    "monitor-port": ({"monitor": {"port": 9500}}, _monitor_port),
    "monitor-extra": (
        {"monitor": {"extraArgs": ["--no-legacy-metrics"], "extraEnv": [{"name": "TZ", "value": "UTC"}]}},
        lambda d: _check(opts(d, "monitor").legacy_metrics is False and env(d, "monitor")["TZ"] == "UTC"),
    ),
    "monitor-resources": (
        {"monitor": {"resources": {"requests": {"cpu": "10m"}}}},
        lambda d: _check(ctr(d, "monitor")["resources"]["requests"]["cpu"] == "10m"),  # helm merges maps
    ),
    "monitor-security-context": (
        {"monitor": {"securityContext": {"runAsUser": 0}}},
        lambda d: _check(ctr(d, "monitor")["securityContext"] == {"runAsUser": 0}),
    ),
    "monitor-service": (
        {"monitor": {"service": {"enabled": False}}},
        lambda d: _check("Service" not in kinds(d) and ctr(d, "monitor")["ports"][0]["containerPort"] == 9394),
    ),
    "service-monitor": (
        {
            "serviceMonitor": {
                "enabled": True,
                "labels": {"release": "kube-prometheus-stack"},
                "interval": "30s",
                "scrapeTimeout": "10s",
            }
        },
        _service_monitor,
    ),
    "prometheus-rule": (
        {
            "prometheusRule": {
                "enabled": True,
                "labels": {"release": "kps"},
                "job": "gpu-metrics",
                "allocationFailures": 7,
                "staleSampleSeconds": 120,
            }
        },
        _prometheus_rule,
    ),
    "dashboard": (
        {
            "dashboard": {
                "enabled": True,
                "labels": {"grafana_dashboard": "yes"},
                "annotations": {"grafana_folder": "GPU"},
                "namespace": "monitoring",
            }
        },
        _dashboard,
    ),
    "admission": (
        {
            "admission": {
                "enabled": True,
                "schedulerServiceAccount": "system:serviceaccount:sched:volcano",
                "resourcePrefix": "example.com/vgpu-",
            }
        },
        _admission,
    ),
    "device-config": ({"deviceConfig": CUSTOM_DEVICE_CONFIG}, _device_config),
    "node-config": ({"nodeConfig": CUSTOM_NODE_CONFIG}, _node_config),
}


def _check(ok: bool) -> None:
    assert ok


def _paths(values: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in values.items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(value, dict) and path not in FREE_FORM:
            out |= _paths(value, path + ".")
    return out


def test_every_value_has_a_case():
    covered = set().union(*(_paths(v) for v, _ in CASES.values()))
    missing = sorted(_leaves(DEFAULTS) - covered)
    assert not missing, f"values without a test case in CASES: {missing}"
    unknown = sorted(
        p
        for p in covered
        if p not in _leaves(DEFAULTS) and not any(leaf.startswith(p + ".") for leaf in _leaves(DEFAULTS))
    )
    assert not unknown, f"cases set values that values.yaml does not have: {unknown}"


@pytest.mark.parametrize("case", sorted(CASES))
def test_value_renders_its_effect(case):
    values, check = CASES[case]
    check(c.docs(values))


def test_defaults_select_gpu_nodes_and_tolerate_the_gpu_taint():
    d = c.docs()
    assert pod(d)["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod(d)["tolerations"]
    assert opts(d).fail_on_init_error is False and opts(d, "monitor").fail_on_init_error is False
    assert "runtimeClassName" not in pod(d) and "RuntimeClass" not in kinds(d)
    _no_cdi_by_default(d)
    if DEFAULTS["plugin"]["metrics"]["enabled"]:  # the endpoint's probes (docs/operations.md §2)
        assert env(d)["VGPU_METRICS_LISTEN"] == f"0.0.0.0:{DEFAULTS['plugin']['metrics']['port']}"
        assert ctr(d)["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "plugin-metrics"}
    else:
        _socket_probes(d)
    # Either way the other setting is one value away.
    flipped = c.docs({"plugin": {"metrics": {"enabled": not DEFAULTS["plugin"]["metrics"]["enabled"]}}})
    assert ("exec" in ctr(flipped)["livenessProbe"]) is DEFAULTS["plugin"]["metrics"]["enabled"]
    assert {"UNHEALTHY_GPU_POLICY", "VGPU_LOG_FORMAT"}.isdisjoint(env(d))
    assert kinds(d) == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Service"}


def test_an_empty_node_selector_runs_everywhere():
    assert "nodeSelector" not in pod(c.docs({"nodeSelector": None}))
    assert "priorityClassName" not in pod(c.docs({"priorityClassName": ""}))


def test_config_values_must_be_text():
    """Upstream's chart takes deviceConfig as a map; here it is the file's text (docs/operations.md §7)."""
    assert "at '/deviceConfig': got object, want string" in c.template_fails({"deviceConfig": {"nvidia": {}}})
    assert "at '/nodeConfig': got object, want string" in c.template_fails({"nodeConfig": {"configs": []}})


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ({"nodeselector": {"a": "b"}}, "additional properties 'nodeselector' not allowed"),
        ({"plugin": {"metrics": {"enabeld": True}}}, "at '/plugin/metrics': additional properties 'enabeld'"),
        ({"handshake": "always"}, "at '/handshake': value must be one of 'auto', 'on', 'off'"),
        ({"failOnInitError": "no"}, "at '/failOnInitError': got string, want boolean"),
        ({"plugin": {"deviceListStrategy": "cdi"}}, "at '/plugin/deviceListStrategy'"),
        ({"image": {"digest": "latest"}}, "at '/image/digest'"),
        ({"monitor": {"port": 70000}}, "at '/monitor/port'"),
        ({"log": {"level": "TRACE"}}, "at '/log/level'"),
    ],
)
def test_the_values_schema_names_a_bad_value(values, error):
    """values.schema.json: a typo or an impossible value fails the install, naming the value."""
    assert error in c.template_fails(values)


def test_runtime_class_creation_needs_a_name():
    assert "runtimeClass.create needs runtimeClassName" in c.template_fails({"runtimeClass": {"create": True}})


def test_release_namespace_is_used_everywhere():
    d = c.docs({"admission": {"enabled": True}, "serviceMonitor": {"enabled": True}}, namespace="gpu-system")
    cluster_scoped = {
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for doc in d:
        if doc["kind"] in cluster_scoped:
            assert "namespace" not in doc["metadata"]
        else:
            assert doc["metadata"]["namespace"] == "gpu-system", doc["kind"]
    (subject,) = m.find(d, "ClusterRoleBinding", "volcano-device-plugin")["subjects"]
    assert subject["namespace"] == "gpu-system"
    sm = m.find(d, "ServiceMonitor", "volcano-device-plugin")
    assert sm["spec"]["namespaceSelector"]["matchNames"] == ["gpu-system"]
    policy = m.find(d, "ValidatingAdmissionPolicy", "vgpu-allocation-annotations")
    writers = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}["writers"]
    assert "'system:serviceaccount:gpu-system:volcano-device-plugin'" in writers


# -- the chart as a whole --------------------------------------------------------------------------


def test_helm_is_v4():
    out = c.run_helm("version", "--short").stdout
    assert out.startswith("v4."), out


def test_lint_strict():
    assert c.run_helm("lint", "--strict", str(c.CHART)).returncode == 0
    every = {k: v for values, _ in CASES.values() for k, v in values.items()}
    with_all = c.CHART.parent / ".lint-all-values.json"
    try:
        with_all.write_text(json.dumps(every))
        out = c.run_helm("lint", "--strict", str(c.CHART), "-f", str(with_all))
        assert "0 chart(s) failed" in out.stdout
    finally:
        with_all.unlink(missing_ok=True)


def test_chart_version_is_the_package_version():
    chart = yaml.safe_load((c.CHART / "Chart.yaml").read_text())
    version = tomllib.loads((m.REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["version"] == chart["appVersion"] == version
    assert {k["image"] for k in pod(c.docs())["containers"]} == {f"vgpu:{version}"}


def test_a_client_side_install_renders_the_notes():
    """``helm install --dry-run=client``: the install path (schema, kubeVersion, NOTES.txt) without a cluster."""
    out = c.run_helm("install", "vgpu", str(c.CHART), "-n", "kube-system", "--dry-run=client").stdout
    notes = out.split("NOTES:", 1)[1]
    assert "kubectl get nodes -l nvidia.com/gpu.present=true -o name" in notes
    assert "waits (failOnInitError=false)" in notes
    bare = c.run_helm("install", "vgpu", str(c.CHART), "--set", "nodeSelector=null", "--dry-run=client").stdout
    assert "runs on every node" in bare.split("NOTES:", 1)[1]


def test_the_chart_refuses_kubernetes_older_than_1_30():
    """kubeVersion in Chart.yaml: the admission policies and every API used are GA in 1.30."""
    old = c.run_helm(*c.template_cmd(None, ()), "--kube-version", "1.29.0", check=False)
    assert old.returncode != 0 and "kubeVersion" in old.stderr
    assert c.run_helm(*c.template_cmd(None, ()), "--kube-version", "1.30.0").returncode == 0


def test_helm_package_holds_the_schema_and_the_dashboard(tmp_path: pathlib.Path):
    c.run_helm("package", str(c.CHART), "--destination", str(tmp_path))
    (tgz,) = tmp_path.glob("volcano-vgpu-*.tgz")
    with tarfile.open(tgz) as tar:
        names = set(tar.getnames())
    for name in ("values.yaml", "values.schema.json", "files/vgpu-dashboard.json", "templates/daemonset.yaml"):
        assert f"volcano-vgpu/{name}" in names, name


def test_generated_manifests_are_fresh():
    stale = c.stale_files()
    assert not stale, f"stale generated manifests (run `make manifests` and commit): {stale}"


def test_default_render_is_the_static_manifest():
    assert c.docs() == m.single_file_docs()
    assert m.SINGLE_FILE.read_text() == c.HEADER + c.template()


def _normalised(docs: Docs) -> dict[tuple[str, str], Any]:
    out = {}
    for doc in copy.deepcopy(docs):
        if doc["kind"] == "DaemonSet":
            for k in doc["spec"]["template"]["spec"]["containers"]:
                k["env"] = sorted(k["env"], key=lambda e: e["name"])
        out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def test_the_kustomize_base_is_the_static_manifest():
    assert _normalised(m.load_docs(m.render_text("base"))) == _normalised(m.single_file_docs())


def test_mig_values_render_the_mig_overlay():
    chart = _normalised(c.docs(values_file=str(MIG_VALUES)))
    overlay = _normalised(m.render("overlays/mig"))
    assert chart == overlay


def test_handshake_on_renders_the_volcano_1_15_overlay():
    assert _normalised(c.docs({"handshake": "on"})) == _normalised(m.render("overlays/volcano-1.15"))


def test_optional_directories_hold_the_chart_objects():
    for name, (values, shown) in c.OPTIONAL.items():
        assert _normalised(m.render(f"optional/{name}")) == _normalised(c.docs(values, show_only=shown)), name


# -- schemas ---------------------------------------------------------------------------------------

CRDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
VARIANTS = {"default": ({}, None), "mig-values": ({}, str(MIG_VALUES))} | {
    name: (values, None) for name, (values, _) in CASES.items()
}


@pytest.mark.parametrize("version", sorted({VERSIONS[0], VERSIONS[-1]}))
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_rendered_object_validates_strictly(variant, version):
    values, values_file = VARIANTS[variant]
    checked = 0
    for doc in c.docs(values, values_file=values_file):
        if (doc["apiVersion"], doc["kind"]) in CRDS:
            continue
        kubernetes_validate.validate(doc, version, strict=True)
        checked += 1
    assert checked >= 6


def test_the_crd_objects_are_well_formed():
    d = c.docs({"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True}})
    sm = m.find(d, "ServiceMonitor", "volcano-device-plugin")
    svc = m.find(d, "Service", "volcano-device-plugin-metrics")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert set(sm["spec"]) == {"selector", "namespaceSelector", "endpoints"}
    rule = m.find(d, "PrometheusRule", "volcano-vgpu")
    assert set(rule["spec"]) == {"groups"}
    for group in rule["spec"]["groups"]:
        assert set(group) == {"name", "rules"}
        for r in group["rules"]:
            assert set(r) <= {"alert", "expr", "for", "labels", "annotations"}, r["alert"]


def test_unknown_value_files_do_not_exist():
    """The chart directory holds only what helm packages (the lint test's scratch file is gone)."""
    assert not (c.CHART.parent / ".lint-all-values.json").exists()
    assert sorted(p.name for p in c.CHART.iterdir()) == [
        ".helmignore",
        "Chart.yaml",
        "files",
        "templates",
        "values.schema.json",
        "values.yaml",
    ]
