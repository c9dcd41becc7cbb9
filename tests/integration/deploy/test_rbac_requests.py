"""The ClusterRole grants exactly what the code uses, read off the simulated API server.

A full end-to-end run with the REAL processes — `vgpu plugin` (registration, handshake,
Allocate success with the node lock, Allocate failure with an Event) and `vgpu monitor`
(node-scoped pod watch) — against the simulated API server over HTTP.  Every request those two
processes made is in the server's request log; the set of (API group, resource, verb) is
compared with the rules of the shipped ClusterRole: a verb the code uses but the role lacks
would be a 403 on a real cluster; a verb the role grants but no code path uses is
over-privilege.  The test's own requests (the scheduler emulator) carry a distinct User-Agent
and are left out.

A second, static check covers code paths an end-to-end run might not reach: every API method of
`vgpu.kube.client.KubeClient` that the code calls maps to a (resource, verb) the role grants.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from tests.unit.deploy import manifests as m

from .conftest import DRIVER_UA, run_allocation_flow, wait_until

REPO = m.REPO
# Non-resource URLs every authenticated identity may GET (the default system:discovery and
# system:public-info-viewer roles); the ClusterRole needs no rule for them.
DISCOVERY_PATHS = ("/version", "/api", "/apis", "/healthz", "/livez", "/readyz", "/openapi")


def _api_group(path: str) -> str:
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:1] == ["api"]:
        return ""
    assert parts[:1] == ["apis"], path
    return parts[1]


def granted(kustomization: str = "base") -> set[tuple[str, str, str]]:
    role = m.find(m.render(kustomization), "ClusterRole", "volcano-device-plugin")
    out = set()
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    assert "*" not in (g, r, v), "no wildcards"
                    out.add((g, r, v))
    return out


def observed(records: Iterable) -> set[tuple[str, str, str]]:
    out = set()
    for r in records:
        if r.user_agent == DRIVER_UA:
            continue
        if not r.resource:
            assert r.path.split("?")[0].startswith(DISCOVERY_PATHS), f"unexpected non-resource request {r.path}"
            continue
        out.add((_api_group(r.path), r.resource, r.verb))
    return out


def test_cluster_role_grants_exactly_the_requests_of_plugin_and_monitor(cluster, monitor_factory):
    api = cluster.api
    run_allocation_flow(cluster)
    # The monitor: starts, maps pods through its node-scoped watch.
    before = api.requests.counts()
    mon = monitor_factory(cluster)
    wait_until(
        lambda: api.requests.counts()[("pods", "watch")] > before[("pods", "watch")], 30, "the monitor's pod watch"
    )
    assert mon.get("/metrics")[0] == 200

    records = api.requests.requests()
    # Both daemons took part (each identifies itself with its own User-Agent) and each watched pods.
    agents = {r.user_agent for r in records if r.user_agent != DRIVER_UA and r.resource}
    assert len(agents) >= 2, f"expected requests from the plugin and the monitor, saw agents {agents}"
    for agent in agents:
        assert any(r.user_agent == agent and (r.resource, r.verb) == ("pods", "watch") for r in records), agent
    seen = observed(records)
    role = granted()
    assert seen == role, (
        f"used but not granted (403 on a real cluster): {sorted(seen - role)}; "
        f"granted but never used (over-privilege): {sorted(role - seen)}"
    )


def test_overlays_grant_the_same_as_the_base():
    for overlay in m.OVERLAYS:
        assert granted(overlay) == granted("base"), overlay


# ---------------------------------------------------------------- static check

# Generated CoreV1Api method name -> (resource, verb) by the client generator's convention.
_API_VERBS = {
    "read": "get",
    "list": "list",
    "patch": "patch",
    "create": "create",
    "replace": "update",
    "delete": "delete",
}
_API_RESOURCES = {"node": "nodes", "pod": "pods", "event": "events"}


def _api_method_to_rbac(method: str, via_watch: bool) -> tuple[str, str, str]:
    action, _, rest = method.partition("_")
    rest = rest.removeprefix("namespaced_").removesuffix("_for_all_namespaces")
    verb = "watch" if via_watch else _API_VERBS[action]
    return "", _API_RESOURCES[rest], verb


def _kube_client_methods() -> dict[str, set[tuple[str, str, str]]]:
    """KubeClient method -> the RBAC triples it can need (from the CoreV1Api calls in its body)."""
    tree = ast.parse((REPO / "vgpu/kube/client.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "KubeClient")
    direct: dict[str, set] = {}
    calls: dict[str, set[str]] = {}
    for fn in cls.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        direct[fn.name], calls[fn.name] = set(), set()
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr in ("_call", "_watch"):
                    for arg in node.args:
                        if (
                            isinstance(arg, ast.Attribute)
                            and isinstance(arg.value, ast.Attribute)
                            and arg.value.attr == "core"
                        ):
                            direct[fn.name].add(_api_method_to_rbac(arg.attr, node.func.attr == "_watch"))
                elif isinstance(node.func.value, ast.Name) and node.func.value.id == "self":
                    calls[fn.name].add(node.func.attr)
    resolved = {}
    for name in direct:  # one level of self-delegation (patch_node_annotations -> patch_node)
        resolved[name] = set(direct[name])
        for callee in calls[name]:
            resolved[name] |= direct.get(callee, set())
    return {k: v for k, v in resolved.items() if v}


# What runs in the DaemonSet under its ServiceAccount.  Operator tools (`vgpu inspect`, the demo)
# use the operator's own credentials and the simulators are test stand-ins: not covered by the role.
DAEMON_PACKAGES = (
    "vgpu/plugin",
    "vgpu/monitor",
    "vgpu/kube",
    "vgpu/nvml",
    "vgpu/hamicore",
    "vgpu/mig",
    "vgpu/config",
    "vgpu/protocol",
)


OPERATOR_TOOLS: tuple[str, ...] = ()  # `vgpu inspect node|pod` (operator kubeconfig) lives in vgpu/cli/, not scanned


def _daemon_sources():
    for package in DAEMON_PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel != "vgpu/kube/client.py" and rel not in OPERATOR_TOOLS:
                yield rel, path


def _called_attribute_names() -> set[str]:
    names = set()
    for _rel, path in _daemon_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
    return names


def test_every_kube_client_call_in_the_code_is_granted():
    methods = _kube_client_methods()
    assert methods, "found no API methods in KubeClient"
    used = _called_attribute_names()
    needed = set().union(*(v for k, v in methods.items() if k in used))
    missing = needed - granted()
    assert not missing, f"code calls KubeClient methods that need {sorted(missing)}"


def test_no_other_module_talks_to_the_api_behind_kube_client():
    """The static check above is only complete if KubeClient is the one way to the API."""
    offenders = []
    for rel, path in _daemon_sources():
        text = path.read_text()
        if any(
            s in text
            for s in (
                "CoreV1Api",
                "EventsV1Api",
                "kubernetes.client",
                "from kubernetes import client",
                "from kubernetes import watch",
            )
        ):
            offenders.append(rel)
    assert not offenders, f"API access outside vgpu/kube/client.py: {offenders}"
