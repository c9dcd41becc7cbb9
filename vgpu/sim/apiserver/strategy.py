"""Registry rules of the simulated API server: how a create, update, binding or delete changes an object.

Like the real apiserver's per-resource "strategies", these are pure functions of the request
and the current object — no locks, no storage — so ``store`` only decides *when* and
*where* a change is committed:

- create: the server owns uid, creationTimestamp, resourceVersion and (pods) generation;
  names come from ``metadata.name`` or ``generateName``; registry defaults and validation run;
- update/patch: identity fields are carried over, a stale ``resourceVersion`` or foreign
  ``uid`` is a 409 Conflict, the status subresource split applies (main resource keeps the
  old status, ``/status`` keeps the old spec), a pod spec may only change in a few fields;
- binding: the pod must exist, be unbound and not be deleting; it gets ``spec.nodeName``,
  the Binding's annotations (merged over its own, as Volcano master relies on) and a
  ``PodScheduled=True`` condition.
"""

from __future__ import annotations

import json
import random
import time
import uuid
from typing import Any

from vgpu.sim.apiserver import errors, resources
from vgpu.sim.apiserver.resources import ResourceType
from vgpu.sim.apiserver.watch import Stored, dumps

_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
)
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_IDENTITY = (
    "name",
    "namespace",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def canonical(obj: Any, what: str = "object") -> Any:
    """A private deep copy that is guaranteed to be plain JSON."""
    try:
        return json.loads(dumps(obj))
    except (TypeError, ValueError) as exc:
        raise errors.bad_request(f"{what} is not valid JSON: {exc}") from None


def ordered(obj: dict[str, Any]) -> dict[str, Any]:
    """kind, apiVersion, metadata (in the real field order), then the rest, like the real server."""
    meta = obj.get("metadata") or {}
    ordered_meta = {k: meta[k] for k in _META_ORDER if k in meta}
    ordered_meta.update((k, v) for k, v in meta.items() if k not in ordered_meta)
    out = {"kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"), "metadata": ordered_meta}
    out.update((k, v) for k, v in obj.items() if k not in out)
    return out


def prepare_body(rt: ResourceType, obj: Any, namespace: str | None) -> dict[str, Any]:
    """Copy a request body, check kind and namespace against the request, stamp kind/apiVersion."""
    obj = canonical(obj)
    if not isinstance(obj, dict):
        raise errors.bad_request(f"a {rt.kind} must be a JSON object")
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    kind = obj.get("kind")
    if kind not in (None, "", rt.kind):
        raise errors.bad_request(f"the kind of the object ({kind}) does not match {rt.kind}")
    obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
    if rt.namespaced:
        body_ns = meta.get("namespace")
        if namespace is None:
            namespace = body_ns or "default"
        elif body_ns and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    return obj


def assign_name(rt: ResourceType, meta: dict[str, Any]) -> str:
    """``metadata.name``, or ``generateName`` plus 5 random characters; 422 when neither is set."""
    name = meta.get("name") or ""
    if not name:
        prefix = meta.get("generateName")
        if not prefix:
            raise errors.invalid(
                rt.kind,
                "",
                [("metadata.name", "FieldValueRequired", "Required value: name or generateName is required")],
            )
        name = str(prefix) + "".join(random.choice(_NAME_CHARS) for _ in range(5))
    meta["name"] = name
    return name


def finish_create(rt: ResourceType, obj: dict[str, Any], now: str, name_causes: list) -> None:
    """Server-owned metadata, registry defaults and validation of a new object (422 Invalid)."""
    meta = obj["metadata"]
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now
    for drop in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
        meta.pop(drop, None)
    if rt.has_generation:
        meta["generation"] = 1
    resources.normalize(rt.kind, obj)
    defaulter = resources.DEFAULTERS.get(rt.kind)
    if defaulter:
        defaulter(obj)
    causes = list(name_causes) + resources.validate(rt.kind, obj)
    if causes:
        raise errors.invalid(rt.kind, meta["name"], causes)


def prepare_update(rt: ResourceType, cur: Stored, new: Any, subresource: str | None) -> dict[str, Any]:
    """The object an update (or patch result) ``new`` turns ``cur`` into, or an ApiError."""
    old = cur.obj
    if not isinstance(new, dict):
        raise errors.invalid(rt.kind, cur.name, [("", "FieldValueInvalid", "Invalid value: not an object")])
    meta = new.get("metadata")
    if not isinstance(meta, dict):
        meta = new["metadata"] = {}
    old_meta = old["metadata"]
    if meta.get("name", cur.name) != cur.name:
        raise errors.bad_request(
            f"the name of the object ({meta.get('name')}) does not match the name on the URL ({cur.name})"
        )
    if rt.namespaced and meta.get("namespace", cur.namespace) != cur.namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != str(cur.rv):
        raise errors.conflict(rt.qualified, cur.name, errors.STALE)
    uid = meta.get("uid")
    if uid not in (None, "") and uid != old_meta.get("uid"):
        raise errors.conflict(
            rt.qualified,
            cur.name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old_meta.get('uid')}",
        )
    for key in _IDENTITY:
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    meta["resourceVersion"] = str(cur.rv)
    new["kind"], new["apiVersion"] = old["kind"], old["apiVersion"]
    if rt.status_subresource:
        keep = "spec" if subresource == "status" else "status"
        if keep in old:
            new[keep] = old[keep]
        else:
            new.pop(keep, None)
        if subresource == "status" and "ownerReferences" in old_meta:
            meta["ownerReferences"] = old_meta["ownerReferences"]
    resources.normalize(rt.kind, new)
    causes = resources.validate(rt.kind, new)
    if rt.kind == "Pod" and subresource != "status":
        causes = resources.pod_update_causes(old, new) + causes
    if causes:
        raise errors.invalid(rt.kind, cur.name, causes)
    if rt.has_generation and new.get("spec") != old.get("spec"):
        meta["generation"] = int(old_meta.get("generation", 1)) + 1
    return new


def parse_binding(namespace: str, binding: Any, pod_name: str | None) -> tuple[str, str, dict[str, str], str]:
    """(pod name, node, annotations, uid precondition) of a Binding body, or 400/422."""
    binding = canonical(binding, "Binding")
    if not isinstance(binding, dict):
        raise errors.bad_request("a Binding must be a JSON object")
    meta = binding.get("metadata") or {}
    name = meta.get("name") or pod_name or ""
    if pod_name and meta.get("name") and meta["name"] != pod_name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL ({pod_name})"
        )
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    target = binding.get("target") or {}
    node = target.get("name") if isinstance(target, dict) else None
    causes = []
    if not name:
        causes.append(("metadata.name", "FieldValueRequired", "Required value"))
    if not node:
        causes.append(("target.name", "FieldValueRequired", "Required value"))
    if isinstance(target, dict) and target.get("kind") not in (None, "", "Node"):
        causes.append(
            (
                "target.kind",
                "FieldValueNotSupported",
                f'Unsupported value: "{target.get("kind")}": supported values: "Node", ""',
            )
        )
    if causes:
        raise errors.invalid("Binding", name, causes)
    return name, str(node), dict(meta.get("annotations") or {}), str(meta.get("uid") or "")


def bound_pod(cur: Stored, node: str, annotations: dict[str, str], uid: str, now: str) -> dict[str, Any]:
    """The pod after a binding (409 when already bound, being deleted, or another uid)."""
    name, meta = cur.name, cur.obj["metadata"]
    if uid and uid != meta.get("uid"):
        raise errors.conflict(
            "pods/binding",
            name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {meta.get('uid')}",
        )
    if meta.get("deletionTimestamp"):
        raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
    assigned = (cur.obj.get("spec") or {}).get("nodeName")
    if assigned:
        raise errors.conflict("pods/binding", name, f'pod {name} is already assigned to node "{assigned}"')
    new = cur.copy()
    new.setdefault("spec", {})["nodeName"] = node
    if annotations:
        new["metadata"].setdefault("annotations", {}).update(annotations)
    causes = resources.validate("Pod", new)
    if causes:
        raise errors.invalid("Pod", name, causes)
    status = new.setdefault("status", {})
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conditions.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now})
    status["conditions"] = conditions
    return new


def check_delete_preconditions(rt: ResourceType, cur: Stored, pre: dict[str, Any] | None) -> None:
    pre = pre or {}
    meta = cur.obj["metadata"]
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise errors.conflict(
            rt.qualified,
            cur.name,
            f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {meta.get('uid')}",
        )
    if pre.get("resourceVersion") and str(pre["resourceVersion"]) != str(cur.rv):
        raise errors.conflict(
            rt.qualified,
            cur.name,
            f"Precondition failed: ResourceVersion in precondition: "
            f"{pre['resourceVersion']}, ResourceVersion in object "
            f"meta: {cur.rv}",
        )


def pod_grace_period(cur: Stored, requested: int | None) -> int:
    """Seconds a graceful delete waits: pods on a node that have not finished, else 0."""
    spec, status = cur.obj.get("spec") or {}, cur.obj.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    grace = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
    return max(0, int(grace))
