"""What the simulated API server serves: resource types, field selectors, defaults, validation.

One ``ResourceType`` per (group, plural) says how the resource is addressed, which verbs and
subresources discovery advertises, which field-selector keys it supports (and how to read
them), and the per-kind rules the real registry applies on create and update (pod defaults,
immutable pod spec, name and label validation). The store (``store``) runs these rules;
the HTTP layer (``server``) only routes.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vgpu.sim.apiserver import events
from vgpu.sim.apiserver.selectors import validate_label_key, validate_label_value

Getter = Callable[[dict[str, Any]], str]


def _path(*keys: str) -> Getter:
    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                return ""
            cur = cur.get(k)
        if cur is None:
            return ""
        if isinstance(cur, bool):
            return "true" if cur else "false"
        return str(cur)

    return get


_META_FIELDS: dict[str, Getter] = {
    "metadata.name": _path("metadata", "name"),
    "metadata.namespace": _path("metadata", "namespace"),
}


@dataclass(frozen=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    storage: str  # key in the store ("events" for both event APIs)
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    subresources: tuple[Subresource, ...] = ()
    fields: dict[str, Getter] = field(default_factory=lambda: dict(_META_FIELDS))
    field_aliases: dict[str, str] = field(default_factory=dict)  # API field key -> storage field key
    status_subresource: bool = False
    create_on_update: bool = False
    return_deleted_object: bool = False
    has_generation: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name used in error messages: ``pods`` or ``events.events.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    def discovery(self) -> list[dict[str, Any]]:
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(self.verbs),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        for sub in self.subresources:
            out.append(
                {
                    "name": f"{self.plural}/{sub.name}",
                    "singularName": "",
                    "namespaced": self.namespaced,
                    "kind": sub.kind,
                    "verbs": list(sub.verbs),
                }
            )
        return out


_STATUS_VERBS = ("get", "patch", "update")

_POD_FIELDS = dict(_META_FIELDS) | {
    "spec.nodeName": _path("spec", "nodeName"),
    "spec.restartPolicy": _path("spec", "restartPolicy"),
    "spec.schedulerName": _path("spec", "schedulerName"),
    "spec.serviceAccountName": _path("spec", "serviceAccountName"),
    "spec.hostNetwork": lambda o: "true" if (o.get("spec") or {}).get("hostNetwork") else "false",
    "status.phase": _path("status", "phase"),
    "status.podIP": _path("status", "podIP"),
    "status.nominatedNodeName": _path("status", "nominatedNodeName"),
}

_NODE_FIELDS = dict(_META_FIELDS) | {
    "spec.unschedulable": lambda o: "true" if (o.get("spec") or {}).get("unschedulable") else "false",
}

_EVENT_FIELDS = (
    dict(_META_FIELDS)
    | {
        f"involvedObject.{k}": _path("involvedObject", k)
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    }
    | {
        "reason": _path("reason"),
        "reportingComponent": _path("reportingComponent"),
        "source": _path("source", "component"),
        "type": _path("type"),
    }
)

PODS = ResourceType(
    "",
    "v1",
    "pods",
    "pod",
    "Pod",
    True,
    "pods",
    ("po",),
    ("all",),
    subresources=(Subresource("binding", "Binding", ("create",)), Subresource("status", "Pod", _STATUS_VERBS)),
    fields=_POD_FIELDS,
    status_subresource=True,
    return_deleted_object=True,
    has_generation=True,
)
NODES = ResourceType(
    "",
    "v1",
    "nodes",
    "node",
    "Node",
    False,
    "nodes",
    ("no",),
    subresources=(Subresource("status", "Node", _STATUS_VERBS),),
    fields=_NODE_FIELDS,
    status_subresource=True,
)
NAMESPACES = ResourceType(
    "",
    "v1",
    "namespaces",
    "namespace",
    "Namespace",
    False,
    "namespaces",
    ("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    subresources=(Subresource("status", "Namespace", _STATUS_VERBS),),
    fields=dict(_META_FIELDS) | {"status.phase": _path("status", "phase")},
    status_subresource=True,
)
CONFIGMAPS = ResourceType("", "v1", "configmaps", "configmap", "ConfigMap", True, "configmaps", ("cm",))
EVENTS = ResourceType(
    "", "v1", "events", "event", "Event", True, "events", ("ev",), fields=_EVENT_FIELDS, create_on_update=True
)
BINDINGS = ResourceType("", "v1", "bindings", "binding", "Binding", True, "pods", verbs=("create",))
EVENTS_V1 = ResourceType(
    "events.k8s.io",
    "v1",
    "events",
    "event",
    "Event",
    True,
    "events",
    ("ev",),
    fields=_EVENT_FIELDS,
    field_aliases=events.FIELD_KEYS,
    create_on_update=True,
)

#: (group, plural) -> type; the order is the discovery order.
RESOURCES: dict[tuple[str, str], ResourceType] = {
    (rt.group, rt.plural): rt for rt in (BINDINGS, CONFIGMAPS, EVENTS, NAMESPACES, NODES, PODS, EVENTS_V1)
}

#: storage key -> the type that defines the stored (core) shape.
STORAGE: dict[str, ResourceType] = {
    "pods": PODS,
    "nodes": NODES,
    "namespaces": NAMESPACES,
    "configmaps": CONFIGMAPS,
    "events": EVENTS,
}

GROUPS: dict[str, str] = {"events.k8s.io": "v1"}


def lookup(group: str, plural: str) -> ResourceType | None:
    return RESOURCES.get((group, plural))


def storage_type(resource: str) -> ResourceType:
    """The type of a store key, accepting ``pods`` as well as ``Pod``-style aliases."""
    rt = STORAGE.get(resource)
    if rt is None:
        raise KeyError(f"unknown resource {resource!r}; known: {', '.join(sorted(STORAGE))}")
    return rt


# --------------------------------------------------------------------------------------
# Defaults (what the real registry fills in on create)
# --------------------------------------------------------------------------------------


def _quantity_positive(value: Any) -> bool:
    text = str(value).strip()
    return bool(text) and text not in ("0", "0m") and not text.startswith("-")


def _qos_class(spec: dict[str, Any]) -> str:
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set, guaranteed = False, True
    for c in containers:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        if any(_quantity_positive(v) for v in list(req.values()) + list(lim.values())):
            any_set = True
        for name in ("cpu", "memory"):
            if name not in lim or str(req.get(name, lim[name])) != str(lim[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _default_container(c: dict[str, Any]) -> None:
    image = str(c.get("image", ""))
    tag = image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        latest = "@" not in tag and (":" not in tag or tag.endswith(":latest"))
        c["imagePullPolicy"] = "Always" if latest else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = c.setdefault("resources", {})
    limits = res.get("limits") or {}
    if limits:
        requests = res.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)


def default_pod(pod: dict[str, Any]) -> None:
    """Defaults of the real Pod registry that code under test may read."""
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for key in ("containers", "initContainers"):
        for c in spec.get(key) or []:
            if isinstance(c, dict):
                _default_container(c)
    # The real registry ignores a status sent on create.
    pod["status"] = {"phase": "Pending", "qosClass": _qos_class(spec)}


def default_namespace(ns: dict[str, Any]) -> None:
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["status"] = {"phase": "Active"}


DEFAULTERS: dict[str, Callable[[dict[str, Any]], None]] = {"Pod": default_pod, "Namespace": default_namespace}


def _quantity_text(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}m"


def _normalize_map(values: Any) -> None:
    if isinstance(values, dict):
        for key, value in values.items():
            values[key] = _quantity_text(value)


def _time_text(value: Any, micro: bool) -> Any:
    """RFC 3339 in UTC as Go's metav1.Time (seconds) / MicroTime (6 digits) marshal it."""
    if not isinstance(value, str) or not value:
        return value
    try:
        parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return value
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    parsed = parsed.astimezone(datetime.UTC)
    return parsed.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def _normalize_times(obj: Any, fields: tuple[str, ...], micro: bool = False) -> None:
    if isinstance(obj, dict):
        for key in fields:
            if key in obj:
                obj[key] = _time_text(obj[key], micro)


def _normalize_conditions(status: Any) -> None:
    if isinstance(status, dict):
        for cond in status.get("conditions") or []:
            _normalize_times(cond, ("lastTransitionTime", "lastProbeTime", "lastHeartbeatTime", "lastUpdateTime"))


_STRUCT_FIELDS = {"Pod": ("spec", "status"), "Node": ("spec", "status"), "Namespace": ("spec", "status")}
_OMIT_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences")


def normalize(kind: str, obj: dict[str, Any]) -> None:
    """Serialize like the real server: struct fields always present (``spec: {}``), empty
    metadata maps and lists omitted, numbers in resource maps as quantity strings."""
    for key in _STRUCT_FIELDS.get(kind, ()):
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in _OMIT_EMPTY_META:
            if key in meta and not meta[key]:
                del meta[key]
    if kind == "Event":
        _normalize_times(obj, ("firstTimestamp", "lastTimestamp"))
        _normalize_times(obj, ("eventTime",), micro=True)
        _normalize_times(obj.get("series"), ("lastObservedTime",), micro=True)
    elif kind in ("Pod", "Node"):
        _normalize_conditions(obj.get("status"))
    if kind == "Pod":
        spec = obj.get("spec") or {}
        for key in ("containers", "initContainers"):
            for c in spec.get(key) or []:
                res = c.get("resources") if isinstance(c, dict) else None
                if isinstance(res, dict):
                    _normalize_map(res.get("limits"))
                    _normalize_map(res.get("requests"))
        _normalize_map(spec.get("overhead"))
    elif kind == "Node":
        status = obj.get("status") or {}
        _normalize_map(status.get("capacity"))
        _normalize_map(status.get("allocatable"))


# --------------------------------------------------------------------------------------
# Validation (422 causes: (field, reason, message))
# --------------------------------------------------------------------------------------

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
Cause = tuple[str, str, str]
_ANNOTATIONS_MAX = 256 * 1024


def _name_causes(kind: str, name: str) -> list[Cause]:
    if kind == "Namespace":
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [
                (
                    "metadata.name",
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower case '
                    "alphanumeric characters or '-', and must start and end with an alphanumeric character",
                )
            ]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return [
            (
                "metadata.name",
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        ]
    return []


def _meta_causes(meta: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    for what in ("labels", "annotations"):
        values = meta.get(what)
        if values is None:
            continue
        if not isinstance(values, dict):
            causes.append((f"metadata.{what}", "FieldValueInvalid", "Invalid value: must be a map of strings"))
            continue
        for key, value in values.items():
            why = validate_label_key(key)
            if why:
                causes.append((f"metadata.{what}", "FieldValueInvalid", f'Invalid value: "{key}": {why}'))
            if not isinstance(value, str):
                causes.append((f"metadata.{what}[{key}]", "FieldValueInvalid", "Invalid value: must be a string"))
            elif what == "labels":
                why = validate_label_value(value)
                if why:
                    causes.append(("metadata.labels", "FieldValueInvalid", f'Invalid value: "{value}": {why}'))
        if what == "annotations":
            size = sum(len(k) + len(str(v)) for k, v in values.items())
            if size > _ANNOTATIONS_MAX:
                causes.append(
                    (
                        "metadata.annotations",
                        "FieldValueTooLong",
                        f"Too long: must have at most {_ANNOTATIONS_MAX} bytes",
                    )
                )
    return causes


def _pod_causes(pod: dict[str, Any]) -> list[Cause]:
    causes: list[Cause] = []
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return [("spec", "FieldValueRequired", "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append(("spec.containers", "FieldValueRequired", "Required value"))
        return causes
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            where = f"spec.{key}[{i}]"
            if not isinstance(c, dict):
                causes.append((where, "FieldValueInvalid", "Invalid value: must be an object"))
                continue
            name = c.get("name")
            if not name:
                causes.append((f"{where}.name", "FieldValueRequired", "Required value"))
            elif not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > 63:
                causes.append(
                    (
                        f"{where}.name",
                        "FieldValueInvalid",
                        f'Invalid value: "{name}": a lowercase RFC 1123 label must consist of lower '
                        "case alphanumeric characters or '-'",
                    )
                )
            elif name in seen:
                causes.append((f"{where}.name", "FieldValueDuplicate", f'Duplicate value: "{name}"'))
            else:
                seen.add(name)
            if not c.get("image"):
                causes.append((f"{where}.image", "FieldValueRequired", "Required value"))
    return causes


def _event_causes(event: dict[str, Any]) -> list[Cause]:
    involved = event.get("involvedObject") or {}
    ns = (event.get("metadata") or {}).get("namespace", "")
    other = involved.get("namespace", "") if isinstance(involved, dict) else ""
    if other and other != ns:
        return [
            (
                "involvedObject.namespace",
                "FieldValueInvalid",
                f'Invalid value: "{other}": does not match event.namespace',
            )
        ]
    return []


def validate(kind: str, obj: dict[str, Any]) -> list[Cause]:
    """Causes that make ``obj`` invalid (empty when valid). Name validity is checked on create."""
    causes = _meta_causes(obj.get("metadata") or {})
    if kind == "Pod":
        causes += _pod_causes(obj)
    elif kind == "Event":
        causes += _event_causes(obj)
    return causes


def validate_name(kind: str, name: str) -> list[Cause]:
    return _name_causes(kind, name)


_POD_MUTABLE = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _pod_spec_frozen(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of a pod spec that an update may not change."""
    frozen = {
        k: v
        for k, v in spec.items()
        if k not in ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds", "schedulingGates")
    }
    for key in ("containers", "initContainers"):
        if isinstance(frozen.get(key), list):
            frozen[key] = [
                {k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in frozen[key]
            ]
    return frozen


def pod_update_causes(old: dict[str, Any], new: dict[str, Any]) -> list[Cause]:
    """The real Pod registry only lets an update change a few spec fields."""
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    if _pod_spec_frozen(old_spec) == _pod_spec_frozen(new_spec):
        old_tol = old_spec.get("tolerations") or []
        new_tol = new_spec.get("tolerations") or []
        if all(t in new_tol for t in old_tol):
            return []
    return [("spec", "FieldValueForbidden", f"Forbidden: pod updates may not change fields other than {_POD_MUTABLE}")]
