"""The three Kubernetes PATCH flavours, applied to plain JSON documents.

- JSON merge patch (RFC 7386, ``application/merge-patch+json``);
- JSON patch (RFC 6902, ``application/json-patch+json``) with RFC 6901 pointers;
- strategic merge patch (``application/strategic-merge-patch+json``): a merge patch whose
  lists follow the Go struct tags of the Kubernetes types — lists with a patch merge key
  (containers by ``name``, conditions by ``type`` ...) are merged element by element,
  primitive lists tagged ``merge`` (finalizers) become set unions, every other list is
  replaced. Directives: ``$patch: replace|delete|merge`` (on maps and list elements),
  ``$deleteFromPrimitiveList/<field>``, ``$setElementOrder/<field>`` and ``$retainKeys``.

The schema below lists the fields of the kinds the simulator serves (Pod, Node, ...); a
field not listed is a map (merged) or a list (replaced), as the real server does for
fields without a patch strategy. Errors are PatchError with ``status`` 400 (the patch
document is malformed) or 422 (it cannot be applied), matching the real server.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any


class PatchError(ValueError):
    """The patch is malformed (status 400) or cannot be applied to the object (422)."""

    def __init__(self, message: str, status: int = 422):
        super().__init__(message)
        self.status = status


# --------------------------------------------------------------------------------------
# Strategic-merge schema: which lists merge, and on which key
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """Patch strategy of one field. ``children`` describes the fields of a map or of list items."""

    merge_key: str | None = None  # list of maps merged on this key
    merge_primitives: bool = False  # list of scalars merged as a set
    children: dict[str, Field] = field(default_factory=dict)


def _merge_list(key: str, children: dict[str, Field] | None = None) -> Field:
    return Field(merge_key=key, children=children or {})


def _struct(**children: Field) -> Field:
    return Field(children=children)


_CONTAINER = {
    "env": _merge_list("name"),
    "ports": _merge_list("containerPort"),
    "volumeMounts": _merge_list("mountPath"),
    "volumeDevices": _merge_list("devicePath"),
}

_OBJECT_META = _struct(
    finalizers=Field(merge_primitives=True),
    ownerReferences=_merge_list("uid"),
)

_POD_SPEC = _struct(
    containers=_merge_list("name", _CONTAINER),
    initContainers=_merge_list("name", _CONTAINER),
    ephemeralContainers=_merge_list("name", _CONTAINER),
    volumes=_merge_list("name"),
    imagePullSecrets=_merge_list("name"),
    hostAliases=_merge_list("ip"),
    resourceClaims=_merge_list("name"),
    schedulingGates=_merge_list("name"),
)

_POD_STATUS = _struct(
    conditions=_merge_list("type"),
    podIPs=_merge_list("ip"),
    hostIPs=_merge_list("ip"),
)

_NODE_SPEC = _struct(podCIDRs=Field(merge_primitives=True))

_NODE_STATUS = _struct(
    conditions=_merge_list("type"),
    addresses=_merge_list("type"),
)

#: Root schema per kind. Kinds not listed get metadata merge rules only.
SCHEMAS: dict[str, Field] = {
    "Pod": _struct(metadata=_OBJECT_META, spec=_POD_SPEC, status=_POD_STATUS),
    "Node": _struct(metadata=_OBJECT_META, spec=_NODE_SPEC, status=_NODE_STATUS),
    "Namespace": _struct(
        metadata=_OBJECT_META,
        spec=_struct(finalizers=Field(merge_primitives=True)),
        status=_struct(conditions=_merge_list("type")),
    ),
}
_DEFAULT_SCHEMA = _struct(metadata=_OBJECT_META)


def schema_for(kind: str) -> Field:
    return SCHEMAS.get(kind, _DEFAULT_SCHEMA)


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def parse_patch_body(body: bytes | str, expect: type) -> Any:
    """Decode a patch body, 400 on bad JSON or the wrong top-level type."""
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PatchError(f"error decoding patch: {exc}", 400) from None
    if not isinstance(doc, expect):
        want = "an object" if expect is dict else "an array of operations"
        raise PatchError(f"error decoding patch: the patch must be {want}", 400)
    return doc


# --------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386)
# --------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, ``null`` deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------------------
# JSON patch (RFC 6902)
# --------------------------------------------------------------------------------------


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise PatchError(f"invalid JSON pointer {path!r}: must be a string", 400)
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer {path!r}: must start with '/'", 400)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _index(container: list, token: str, path: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise PatchError(f"invalid array index {token!r} in path {path!r}")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise PatchError(f"array index {idx} out of bounds in path {path!r}")
    return idx


def _parent(doc: Any, tokens: list[str], path: str) -> Any:
    node = doc
    for tok in tokens[:-1]:
        if isinstance(node, dict):
            if tok not in node:
                raise PatchError(f"doc is missing path: {path!r}")
            node = node[tok]
        elif isinstance(node, list):
            node = node[_index(node, tok, path, False)]
        else:
            raise PatchError(f"doc is missing path: {path!r}")
    return node


def _get(doc: Any, path: str) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return doc
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"doc is missing path: {path!r}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, path, False)]
    raise PatchError(f"doc is missing path: {path!r}")


def _add(doc: Any, path: str, value: Any) -> Any:
    tokens = _pointer(path)
    if not tokens:
        return value
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, True), value)
    else:
        raise PatchError(f"doc is missing path: {path!r}")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _pointer(path)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(doc, tokens, path)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"unable to remove nonexistent key: {last}: missing value")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, path, False))
    raise PatchError(f"doc is missing path: {path!r}")


def json_patch(target: Any, operations: list) -> Any:
    """RFC 6902 on a deep copy of ``target``; ``test`` failures and bad paths are 422."""
    doc = copy.deepcopy(target)
    for n, op in enumerate(operations):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str):
            raise PatchError(f"invalid JSON patch operation #{n}: must be an object with a string 'op'", 400)
        kind = op["op"]
        if "path" not in op:
            raise PatchError(f"invalid JSON patch operation #{n} ({kind}): missing 'path'", 400)
        path = op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"invalid JSON patch operation #{n} ({kind}): missing 'value'", 400)
        if kind in ("move", "copy") and "from" not in op:
            raise PatchError(f"invalid JSON patch operation #{n} ({kind}): missing 'from'", 400)
        if kind == "add":
            doc = _add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            _get(doc, path)  # must exist
            tokens = _pointer(path)
            if not tokens:
                doc = copy.deepcopy(op["value"])
            else:
                parent = _parent(doc, tokens, path)
                if isinstance(parent, list):
                    parent[_index(parent, tokens[-1], path, False)] = copy.deepcopy(op["value"])
                else:
                    parent[tokens[-1]] = copy.deepcopy(op["value"])
        elif kind == "move":
            src = op["from"]
            if path != src and path.startswith(src + "/"):
                raise PatchError(f"cannot move {src!r} into its own child {path!r}")
            doc, value = _remove(doc, src)
            doc = _add(doc, path, value)
        elif kind == "copy":
            doc = _add(doc, path, copy.deepcopy(_get(doc, op["from"])))
        elif kind == "test":
            try:
                have = _get(doc, path)
            except PatchError:
                raise PatchError(f"testing value {path} failed: path does not exist") from None
            if have != op["value"] or isinstance(have, bool) != isinstance(op["value"], bool):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"invalid JSON patch operation #{n}: unexpected kind {kind!r}", 400)
    return doc


# --------------------------------------------------------------------------------------
# Strategic merge patch
# --------------------------------------------------------------------------------------

_PATCH = "$patch"
_RETAIN = "$retainKeys"
_DELETE_PRIM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge_patch(target: dict, patch: dict, kind: str) -> dict:
    """Apply a strategic merge patch to ``target`` (not modified) using ``kind``'s schema."""
    if not isinstance(patch, dict):
        raise PatchError("strategic merge patch must be an object", 400)
    result = _merge_map(target if isinstance(target, dict) else {}, patch, schema_for(kind), "")
    return result if result is not _DELETED else {}


_DELETED = object()  # a map removed by ``$patch: delete``


def _merge_map(original: dict, patch: dict, schema: Field, where: str) -> Any:
    directive = patch.get(_PATCH)
    if directive is not None:
        if directive == "delete":
            return _DELETED
        if directive == "replace":
            return _strip({k: v for k, v in patch.items() if k != _PATCH})
        if directive != "merge":
            raise PatchError(f"unknown patch directive {directive!r} at {where or '<root>'}")
    result = dict(original)
    retain = patch.get(_RETAIN)
    orders: dict[str, list] = {}
    deletions: dict[str, list] = {}
    for key, value in patch.items():
        if key in (_PATCH, _RETAIN):
            continue
        if key.startswith(_ORDER):
            orders[key[len(_ORDER) :]] = value if isinstance(value, list) else []
            continue
        if key.startswith(_DELETE_PRIM):
            if not isinstance(value, list):
                raise PatchError(f"{key} at {where or '<root>'} must be a list")
            deletions[key[len(_DELETE_PRIM) :]] = value
            continue
        path = f"{where}.{key}" if where else key
        child = schema.children.get(key, Field())
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            merged = _merge_map(base if isinstance(base, dict) else {}, value, child, path)
            if merged is _DELETED:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list_value(result.get(key), value, child, path)
        else:
            result[key] = value
    for name, drop in deletions.items():
        current = result.get(name)
        if isinstance(current, list):
            result[name] = [v for v in current if v not in drop]
    for name, order in orders.items():
        current = result.get(name)
        child = schema.children.get(name, Field())
        if isinstance(current, list):
            result[name] = _apply_order(current, order, child)
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError(f"$retainKeys at {where or '<root>'} must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _strip(value: Any) -> Any:
    """Drop directive keys from a value that is copied verbatim into the result."""
    if isinstance(value, dict):
        return {
            k: _strip(v)
            for k, v in value.items()
            if k not in (_PATCH, _RETAIN) and not k.startswith((_ORDER, _DELETE_PRIM)) and v is not None
        }
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and v.get(_PATCH) is not None and len(v) == 1)]
    return value


def _merge_list_value(original: Any, patch: list, schema: Field, where: str) -> list:
    if any(isinstance(v, list) for v in patch):
        raise PatchError(f"lists of lists are not supported in strategic merge patch ({where})", 400)
    # A lone {"$patch": "replace"} element replaces the whole list with the other elements.
    if any(isinstance(v, dict) and v.get(_PATCH) == "replace" and len(v) == 1 for v in patch):
        return _strip([v for v in patch if not (isinstance(v, dict) and v.get(_PATCH) == "replace")])
    base = original if isinstance(original, list) else []
    if schema.merge_primitives:
        out = list(base)
        for v in patch:
            if v not in out:
                out.append(copy.deepcopy(v))
        return out
    if schema.merge_key is None:
        return _strip(copy.deepcopy(patch))
    key = schema.merge_key
    out = list(base)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchError(f"{where}: list is merged on key {key!r}, but an element is not an object")
        if key not in item:
            raise PatchError(f"map: {_short(item)} does not contain declared merge key: {key} ({where})")
        ident = item[key]
        pos = next((i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(key) == ident), None)
        if item.get(_PATCH) == "delete":
            out = [cur for cur in out if not (isinstance(cur, dict) and cur.get(key) == ident)]
            continue
        child = Field(children=schema.children)
        path = f"{where}[{key}={ident}]"
        if pos is None:
            merged = _merge_map({}, item, child, path)
            if merged is not _DELETED:
                out.append(merged)
        else:
            merged = _merge_map(out[pos], item, child, path)
            if merged is _DELETED:
                out.pop(pos)
            else:
                out[pos] = merged
    return out


def _apply_order(current: list, order: list, schema: Field) -> list:
    """``$setElementOrder``: listed elements first, in the given order; the rest keep theirs."""
    key = schema.merge_key

    def ident(v: Any) -> Any:
        return json.dumps(v.get(key) if key and isinstance(v, dict) else v, sort_keys=True)

    wanted = [ident(o) for o in order]
    rank = {w: i for i, w in enumerate(wanted)}
    listed = sorted((v for v in current if ident(v) in rank), key=lambda v: rank[ident(v)])
    rest = [v for v in current if ident(v) not in rank]
    return listed + rest


def _short(item: dict) -> str:
    text = json.dumps(item, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."
