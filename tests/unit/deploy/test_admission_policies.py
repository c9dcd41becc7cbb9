"""The admission guardrails in deploy/optional/admission, evaluated by a real CEL implementation.

``cel-python`` (``celpy``) compiles and runs every expression of the two
ValidatingAdmissionPolicies as the API server would for one admission request: the policy's
``matchConstraints`` select the request (operation, resource, subresource), its ``variables`` are
evaluated in order into ``variables``, and the request is allowed only when every validation is
``true``.  An expression that errors would, with ``failurePolicy: Fail``, deny — so the
tests insist that none errors: every denial is a ``false``, never an accident.

The requests are built the way the API server builds them — ``object`` / ``oldObject`` (null on
CREATE), ``request.operation``, ``request.subResource`` only when there is one (the field is
``omitempty``), ``request.userInfo.username`` — from real pod objects: the pods of
deploy/examples, the six keys the Volcano scheduler writes (``vgpu.protocol.scheduler_allocation``,
the same function the scheduler emulator uses) and the plugin's own follow-up patch.  Each rule
is shown to allow and to deny.  The manifests' schemas are checked by test_manifest_schemas.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import celpy
import pytest

from vgpu.protocol import ContainerDevice, keys, scheduler_allocation

from . import manifests as m

SCHEDULER = "system:serviceaccount:volcano-system:volcano-scheduler"
PLUGIN = "system:serviceaccount:kube-system:volcano-device-plugin"
TENANT = "system:serviceaccount:team-a:default"
ALICE = "alice@example.com"
KUBELET = "system:node:gpu-node-1"
NODE = "gpu-node-1"
GPU0 = "GPU-1c5009f6-3637-cd7d-4955-5eaa038e563e"
GPU1 = "GPU-809c7a2e-0d6e-4a8f-9b1c-2f3e4d5a6b7c"

_ENV = celpy.Environment()


@dataclass
class Verdict:
    matched: bool
    allowed: bool
    failed: list[str] = field(default_factory=list)  # messages of the validations that were false
    errors: list[str] = field(default_factory=list)  # expressions that raised (deny by failurePolicy)


def _policies() -> dict[str, dict[str, Any]]:
    docs = m.render(m.ADMISSION)
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}


def _matches(policy: dict[str, Any], req: dict[str, Any]) -> bool:
    resource = "pods" + (f"/{req['subResource']}" if req.get("subResource") else "")
    for rule in policy["spec"]["matchConstraints"]["resourceRules"]:
        if req["operation"] in rule["operations"] and resource in rule["resources"]:
            assert rule["apiGroups"] == [""] and rule["apiVersions"] == ["v1"]
            return True
    return False


def evaluate(policy: dict[str, Any], req: dict[str, Any], obj: dict[str, Any] | None, old: dict[str, Any] | None):
    """What the API server decides for ``req`` under ``policy`` (its binding: validationActions Deny)."""
    if not _matches(policy, req):
        return Verdict(False, True)
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(old),
        "request": celpy.json_to_cel(req),
    }
    variables: dict[str, Any] = {}
    verdict = Verdict(True, True)
    for var in policy["spec"].get("variables", []):
        activation["variables"] = celpy.celtypes.MapType(
            {celpy.celtypes.StringType(k): v for k, v in variables.items()}
        )
        try:
            variables[var["name"]] = _ENV.program(_ENV.compile(var["expression"])).evaluate(activation)
        except celpy.CELEvalError as exc:
            verdict.errors.append(f"variables.{var['name']}: {exc}")
            verdict.allowed = False
            return verdict
    activation["variables"] = celpy.celtypes.MapType({celpy.celtypes.StringType(k): v for k, v in variables.items()})
    for rule in policy["spec"]["validations"]:
        try:
            result = _ENV.program(_ENV.compile(rule["expression"])).evaluate(activation)
        except celpy.CELEvalError as exc:
            verdict.errors.append(f"{rule['expression']}: {exc}")
            verdict.allowed = False
            continue
        assert isinstance(result, celpy.celtypes.BoolType), f"not a bool: {result!r}"
        if not result:
            verdict.allowed = False
            verdict.failed.append(rule["message"])
    return verdict


def request(operation: str, user: str, sub_resource: str = "") -> dict[str, Any]:
    req: dict[str, Any] = {
        "operation": operation,
        "userInfo": {"username": user, "groups": ["system:authenticated"]},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-a",
    }
    if sub_resource:
        req["subResource"] = sub_resource  # omitempty: absent for the pod itself
    return req


def example_pod(name: str) -> dict[str, Any]:
    (doc,) = m.load_docs((m.DEPLOY / "examples" / name).read_text())
    pod = copy.deepcopy(doc)
    pod["metadata"]["namespace"] = "team-a"
    return pod


def allocation() -> dict[str, str]:
    """The six keys exactly as the Volcano scheduler writes them for 01-fractional-gpu.yaml."""
    return scheduler_allocation(NODE, [[ContainerDevice(GPU0, 8192, 30)]], 1784884863)


def with_annotations(pod: dict[str, Any], extra: dict[str, str | None]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    ann = dict(out["metadata"].get("annotations") or {})
    for k, v in extra.items():
        if v is None:
            ann.pop(k, None)
        else:
            ann[k] = v
    if ann:
        out["metadata"]["annotations"] = ann
    else:
        out["metadata"].pop("annotations", None)
    return out


def created(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as stored after CREATE (what later UPDATEs see as oldObject)."""
    out = copy.deepcopy(pod)
    out["metadata"].update(uid="6f1c7d2e-0d2b-4a53-9d51-2b3c4d5e6f70", resourceVersion="100")
    out["status"] = {"phase": "Pending"}
    return out


@pytest.fixture(scope="module")
def policies():
    return _policies()


@pytest.fixture(scope="module")
def annotations_policy(policies):
    return policies["vgpu-allocation-annotations"]


@pytest.fixture(scope="module")
def privileged_policy(policies):
    return policies["vgpu-privileged-containers"]


def _ok(v: Verdict) -> None:
    assert v.matched and v.allowed and not v.errors, v


def _denied(v: Verdict, words: str) -> None:
    assert v.matched and not v.allowed and not v.errors, v
    assert any(words in msg for msg in v.failed), v


# ------------------------------------------------------------------ policies and bindings


def test_each_policy_has_a_deny_binding_and_fails_closed(policies):
    docs = m.render(m.ADMISSION)
    bindings = {d["spec"]["policyName"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert set(bindings) == set(policies) == {"vgpu-allocation-annotations", "vgpu-privileged-containers"}
    for name, b in bindings.items():
        assert b["metadata"]["name"] == name
        assert b["spec"]["validationActions"] == ["Deny"]
        assert "matchResources" not in b["spec"], "every namespace, kube-system included"
        assert policies[name]["spec"]["failurePolicy"] == "Fail"
        assert "namespace" not in b["metadata"] and "namespace" not in policies[name]["metadata"]
    for p in policies.values():
        for v in p["spec"]["validations"]:
            assert "\n" not in v["message"], "the API server refuses a message with a line break"


def test_the_guarded_keys_are_the_scheduler_s_allocation_keys(annotations_policy):
    (var,) = [v for v in annotations_policy["spec"]["variables"] if v["name"] == "keys"]
    listed = _ENV.program(_ENV.compile(var["expression"])).evaluate({})
    assert sorted(str(k) for k in listed) == sorted(allocation()) == sorted(keys.SCHEDULER_ALLOCATION_KEYS)


def test_the_writers_are_the_shipped_service_accounts(annotations_policy):
    (var,) = [v for v in annotations_policy["spec"]["variables"] if v["name"] == "writers"]
    writers = [str(w) for w in _ENV.program(_ENV.compile(var["expression"])).evaluate({})]
    sa = m.find(m.single_file_docs(), "ServiceAccount", "volcano-device-plugin")
    assert f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}" == PLUGIN
    assert writers == [SCHEDULER, PLUGIN]


def test_expressions_use_only_core_cel(policies):
    """No Kubernetes extension library: the functions both implementations share, nothing else."""
    extension_calls = (".split(", ".join(", ".lowerAscii(", ".upperAscii(", ".replace(", ".indexOf(", ".trim(",
                       ".orValue(", ".optMap(", "?.", ".sum(", ".min(", ".max(", ".sort(", ".isSorted(",
                       "url(", "ip(", "cidr(", "quantity(", "format(", ".filter(", ".map(", "authorizer")  # fmt: skip
    for p in policies.values():
        exprs = [v["expression"] for v in p["spec"].get("variables", [])]
        exprs += [v["expression"] for v in p["spec"]["validations"]]
        for e in exprs:
            assert not [c for c in extension_calls if c in e], e
            _ENV.compile(e)  # parses


# ------------------------------------------------------------------ (a) allocation annotations


@pytest.mark.parametrize("user", [TENANT, ALICE, SCHEDULER, PLUGIN])
def test_a_pod_created_with_allocation_annotations_is_refused(annotations_policy, user):
    """The forged allocation: spec.nodeName plus the six keys, bypassing the scheduler."""
    pod = with_annotations(example_pod("01-fractional-gpu.yaml"), allocation())
    pod["spec"]["nodeName"] = NODE
    _denied(evaluate(annotations_policy, request("CREATE", user), pod, None), "cannot be created")


@pytest.mark.parametrize("key", sorted(allocation()))
def test_any_single_allocation_key_at_create_is_refused(annotations_policy, key):
    pod = with_annotations(example_pod("01-fractional-gpu.yaml"), {key: allocation()[key]})
    _denied(evaluate(annotations_policy, request("CREATE", TENANT), pod, None), "cannot be created")


@pytest.mark.parametrize(
    "example", ["01-fractional-gpu.yaml", "02-multi-container.yaml", "03-two-gpus.yaml", "04-mig.yaml"]
)
def test_ordinary_pods_are_created(annotations_policy, example):
    pod = example_pod(example)  # user annotations such as volcano.sh/vgpu-mode are fine
    _ok(evaluate(annotations_policy, request("CREATE", TENANT), pod, None))
    bare = with_annotations(pod, {k: None for k in (pod["metadata"].get("annotations") or {})})
    assert "annotations" not in bare["metadata"]
    _ok(evaluate(annotations_policy, request("CREATE", TENANT), bare, None))


def test_the_allocation_lifecycle_passes(annotations_policy):
    """Scheduler writes the keys (v1.9-v1.15: a PATCH of the pod; master: on the Binding), the
    plugin consumes the segment and reports success, the kubelet updates the status, the owner
    changes an unrelated annotation."""
    pod = created(example_pod("01-fractional-gpu.yaml"))
    scheduled = with_annotations(pod, allocation())
    _ok(evaluate(annotations_policy, request("UPDATE", SCHEDULER), scheduled, pod))
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod["metadata"]["name"], "namespace": "team-a", "annotations": allocation()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
    }
    _ok(evaluate(annotations_policy, request("CREATE", SCHEDULER, "binding"), binding, None))
    served = with_annotations(
        scheduled,
        {keys.DEVICES_TO_ALLOCATE: "", keys.BIND_PHASE: keys.BIND_PHASE_SUCCESS, keys.VGPU_TIME: keys.VGPU_TIME_DONE},
    )
    _ok(evaluate(annotations_policy, request("UPDATE", PLUGIN), served, scheduled))
    running = copy.deepcopy(served)
    running["status"] = {"phase": "Running"}
    _ok(evaluate(annotations_policy, request("UPDATE", KUBELET, "status"), running, served))
    relabelled = with_annotations(running, {"team-a/owner": "bob"})
    _ok(evaluate(annotations_policy, request("UPDATE", TENANT), relabelled, running))


@pytest.mark.parametrize(
    "change",
    [
        "add-all",  # a pending pod annotated by hand before the scheduler got to it
        "rewrite-devices",  # point devices-to-allocate at another tenant's GPU
        "reset-bind-phase",  # make a served pod look pending again
        "remove-vgpu-ids",  # hide what the pod holds from the scheduler's ledger
    ],
)
@pytest.mark.parametrize("sub_resource", ["", "status"])
def test_others_cannot_change_the_allocation_annotations(annotations_policy, change, sub_resource):
    pod = created(example_pod("01-fractional-gpu.yaml"))
    scheduled = with_annotations(pod, allocation())
    old, new = {
        "add-all": (pod, scheduled),
        "rewrite-devices": (
            scheduled,
            with_annotations(scheduled, {keys.DEVICES_TO_ALLOCATE: f"{GPU1},NVIDIA,81920,100:"}),
        ),
        "reset-bind-phase": (
            with_annotations(scheduled, {keys.BIND_PHASE: keys.BIND_PHASE_SUCCESS}),
            with_annotations(scheduled, {keys.BIND_PHASE: keys.BIND_PHASE_ALLOCATING}),
        ),
        "remove-vgpu-ids": (scheduled, with_annotations(scheduled, {keys.VGPU_IDS_NEW: None})),
    }[change]
    for user in (TENANT, ALICE, KUBELET):
        _denied(evaluate(annotations_policy, request("UPDATE", user, sub_resource), new, old), "may set, change")
    _ok(evaluate(annotations_policy, request("UPDATE", SCHEDULER, sub_resource), new, old))


def test_a_binding_with_allocation_annotations_needs_the_scheduler(annotations_policy):
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p", "namespace": "team-a", "annotations": allocation()},
        "target": {"apiVersion": "v1", "kind": "Node", "name": NODE},
    }
    _denied(evaluate(annotations_policy, request("CREATE", TENANT, "binding"), binding, None), "may set, change")
    plain = {**binding, "metadata": {"name": "p", "namespace": "team-a"}}
    _ok(evaluate(annotations_policy, request("CREATE", TENANT, "binding"), plain, None))


def test_requests_outside_the_match_are_not_judged(annotations_policy):
    pod = created(with_annotations(example_pod("01-fractional-gpu.yaml"), allocation()))
    assert not evaluate(annotations_policy, request("DELETE", TENANT), None, pod).matched
    assert not evaluate(annotations_policy, request("CREATE", TENANT, "eviction"), {}, None).matched


# ------------------------------------------------------------------ (b) privileged vGPU containers


def _privileged(pod: dict[str, Any], index: int = 0, *, init: bool = False, value: bool = True) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    ctr = out["spec"]["initContainers" if init else "containers"][index]
    ctr.setdefault("securityContext", {})["privileged"] = value
    return out


def _create(policy, pod):
    return evaluate(policy, request("CREATE", TENANT), pod, None)


@pytest.mark.parametrize("example", ["01-fractional-gpu.yaml", "03-two-gpus.yaml", "04-mig.yaml"])
def test_a_privileged_vgpu_container_is_refused(privileged_policy, example):
    _denied(_create(privileged_policy, _privileged(example_pod(example))), "privileged container")


def test_requests_count_as_much_as_limits(privileged_policy):
    pod = _privileged(example_pod("01-fractional-gpu.yaml"))
    res = pod["spec"]["containers"][0]["resources"]
    res["requests"] = res.pop("limits")
    _denied(_create(privileged_policy, pod), "privileged container")
    res["requests"] = {"volcano.sh/vgpu-memory": 1024}  # memory alone is a vGPU request too
    _denied(_create(privileged_policy, pod), "privileged container")


def test_a_privileged_init_container_with_vgpu_is_refused(privileged_policy):
    pod = example_pod("01-fractional-gpu.yaml")
    init = copy.deepcopy(pod["spec"]["containers"][0])
    init["name"] = "warmup"
    pod["spec"]["initContainers"] = [init]
    _ok(_create(privileged_policy, pod))
    _denied(_create(privileged_policy, _privileged(pod, init=True)), "init container")


def test_other_containers_may_be_privileged_and_vgpu_ones_unprivileged(privileged_policy):
    pod = example_pod("02-multi-container.yaml")
    ctrs = pod["spec"]["containers"]
    vgpu = [any(r.startswith("volcano.sh/vgpu-") for r in (c.get("resources") or {}).get("limits", {})) for c in ctrs]
    plain = [i for i, v in enumerate(vgpu) if not v]
    gpu = [i for i, v in enumerate(vgpu) if v]
    assert plain and gpu, "02-multi-container.yaml has a container without vGPU next to vGPU ones"
    _ok(_create(privileged_policy, pod))
    _ok(_create(privileged_policy, _privileged(pod, plain[0])))  # a privileged sidecar without vGPU
    _ok(_create(privileged_policy, _privileged(pod, gpu[0], value=False)))  # explicit privileged: false
    _denied(_create(privileged_policy, _privileged(pod, gpu[-1])), "privileged container")


def test_other_extended_resources_are_not_vgpu(privileged_policy):
    pod = example_pod("01-fractional-gpu.yaml")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 1, "cpu": "1"}}
    _ok(_create(privileged_policy, _privileged(pod)))
    del pod["spec"]["containers"][0]["resources"]
    _ok(_create(privileged_policy, _privileged(pod)))


def test_the_privileged_rule_judges_only_pod_creation(privileged_policy):
    pod = created(_privileged(example_pod("01-fractional-gpu.yaml")))
    assert not evaluate(privileged_policy, request("UPDATE", TENANT), pod, pod).matched


def test_the_evaluator_is_not_vacuous(annotations_policy, privileged_policy):
    """Negative controls: weakened copies of the policies let the attacks through."""
    forged = with_annotations(example_pod("01-fractional-gpu.yaml"), allocation())
    open_create = copy.deepcopy(annotations_policy)
    open_create["spec"]["validations"][0]["expression"] = "true"
    _ok(evaluate(open_create, request("CREATE", TENANT), forged, None))
    no_writers = copy.deepcopy(annotations_policy)
    for var in no_writers["spec"]["variables"]:
        if var["name"] == "writers":
            var["expression"] = "['nobody']"
    pod = created(example_pod("01-fractional-gpu.yaml"))
    _denied(evaluate(no_writers, request("UPDATE", SCHEDULER), with_annotations(pod, allocation()), pod), "may set")
    broken = copy.deepcopy(privileged_policy)
    broken["spec"]["validations"][0]["expression"] = "object.spec.nonexistent"
    v = evaluate(broken, request("CREATE", TENANT), example_pod("01-fractional-gpu.yaml"), None)
    assert not v.allowed and v.errors, "an erroring expression denies (failurePolicy: Fail) and is reported"
