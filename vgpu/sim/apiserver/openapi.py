"""A minimal OpenAPI v3 description, only what kubectl reads before writing.

``kubectl create -f`` (and other writers with ``--validate=strict``, the default) first ask
the OpenAPI v3 document whether the PATCH operation of the object's kind accepts the
``fieldValidation`` query parameter; if it does, kubectl leaves validation to the server,
otherwise it wants a full client-side schema and fails without one. So each group-version
document lists, per kind, the item path with a PATCH operation carrying the
``x-kubernetes-group-version-kind`` extension and the write parameters. There are no
schemas: ``kubectl explain`` and client-side apply are not supported. OpenAPI v2 is not
served (404), which kubectl tolerates once v3 answered.
"""

from __future__ import annotations

import hashlib
from typing import Any

from vgpu.sim.apiserver import resources
from vgpu.sim.apiserver.watch import dumps

_WRITE_PARAMS = [
    {"name": n, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
    for n in ("dryRun", "fieldManager", "fieldValidation")
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def group_versions() -> dict[str, tuple[str, str]]:
    """``api/v1`` -> ("", "v1"), ``apis/events.k8s.io/v1`` -> (group, version)."""
    out = {"api/v1": ("", "v1")}
    for group, version in resources.GROUPS.items():
        out[_gv_path(group, version)] = (group, version)
    return out


def document(group: str, version: str, kubernetes_version: str) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for rt in resources.RESOURCES.values():
        if rt.group != group or rt.version != version or "patch" not in rt.verbs:
            continue
        base = "/" + _gv_path(group, version)
        scope = "/namespaces/{namespace}" if rt.namespaced else ""
        gvk = {"group": group, "version": version, "kind": rt.kind}
        op = {
            "operationId": f"patch{rt.kind}",
            "x-kubernetes-group-version-kind": gvk,
            "x-kubernetes-action": "patch",
            "parameters": _WRITE_PARAMS,
            "responses": {"200": {"description": "OK"}},
        }
        post = dict(op, operationId=f"create{rt.kind}", **{"x-kubernetes-action": "post"})
        paths[f"{base}{scope}/{rt.plural}/{{name}}"] = {"patch": op}
        paths[f"{base}{scope}/{rt.plural}"] = {"post": post}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": kubernetes_version},
        "paths": paths,
        "components": {"schemas": {}},
    }


def _hash(doc: dict[str, Any]) -> str:
    return hashlib.sha512(dumps(doc)).hexdigest()[:128].upper()


def root(kubernetes_version: str) -> dict[str, Any]:
    paths = {}
    for gv, (group, version) in group_versions().items():
        digest = _hash(document(group, version, kubernetes_version))
        paths[gv] = {"serverRelativeURL": f"/openapi/v3/{gv}?hash={digest}"}
    return {"paths": paths}
