"""Request handling of the simulated API server, independent of the socket layer.

``route`` turns a URL path into a resource address, ``verb_of`` names the Kubernetes verb,
and ``Handlers.handle`` answers one request with a ``Response`` (or a watch to stream),
raising ApiError for every failure so the HTTP layer can render the Status body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from vgpu.sim.apiserver import errors, events, openapi, resources, tables
from vgpu.sim.apiserver.errors import ApiError
from vgpu.sim.apiserver.resources import ResourceType
from vgpu.sim.apiserver.selectors import FieldRequirement, FieldSelector
from vgpu.sim.apiserver.store import Store, compile_selectors
from vgpu.sim.apiserver.watch import Stored, Watcher, WatchEvent, dumps

PATCH_CONTENT_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""
    query_string: str = ""

    @classmethod
    def parse(cls, method: str, target: str, headers: dict[str, str], body: bytes) -> Request:
        path, _, qs = target.partition("?")
        return cls(method, path, parse_qs(qs, keep_blank_values=True), headers, body, qs)

    def q(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else default

    def flag(self, name: str) -> bool:
        return (self.q(name) or "").lower() in ("true", "1")


@dataclass
class Route:
    """Where a request points. ``rt`` is None for non-resource paths (discovery, /version)."""

    rt: ResourceType | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    watch_path: bool = False
    special: str | None = None  # "version", "api", "apis", "group:<g>", "groupversion:<g>/<v>", "health"

    @property
    def resource(self) -> str:
        if self.rt is None:
            return ""
        return f"{self.rt.plural}/{self.subresource}" if self.subresource else self.rt.plural


@dataclass
class Response:
    code: int = 200
    body: bytes = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    watcher: Watcher | None = None
    render_event: Callable[[WatchEvent], bytes] | None = None
    timeout: float | None = None
    bookmarks: bool = False


def route(path: str) -> Route:
    """Parse a URL path; raises ApiError 404 for paths the real server would not serve."""
    parts = [p for p in path.split("/") if p]
    if path in ("/version", "/version/"):
        return Route(special="version")
    if parts and parts[0] in ("healthz", "livez", "readyz"):
        return Route(special="health")
    if parts == ["api"]:
        return Route(special="api")
    if parts[:2] == ["openapi", "v3"]:
        gv = "/".join(parts[2:])
        if gv and gv not in openapi.group_versions():
            raise errors.not_found_path()
        return Route(special=f"openapi:{gv}")
    if parts == ["apis"]:
        return Route(special="apis")
    if len(parts) >= 2 and parts[0] == "api" and parts[1] == "v1":
        group, rest = "", parts[2:]
        if not rest:
            return Route(special="groupversion:v1")
    elif len(parts) >= 2 and parts[0] == "apis":
        group = parts[1]
        if group not in resources.GROUPS:
            raise errors.not_found_path()
        if len(parts) == 2:
            return Route(special=f"group:{group}")
        if parts[2] != resources.GROUPS[group]:
            raise errors.not_found_path()
        if len(parts) == 3:
            return Route(special=f"groupversion:{group}/{parts[2]}")
        rest = parts[3:]
    else:
        raise errors.not_found_path()
    watch_path = False
    if rest and rest[0] == "watch":
        watch_path, rest = True, rest[1:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and resources.lookup(group, rest[2]):
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        raise errors.not_found_path()
    rt = resources.lookup(group, rest[0])
    if rt is None:
        raise errors.not_found_path()
    if rt.namespaced is False and namespace is not None:
        raise errors.not_found_path()
    r = Route(rt, namespace, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None, watch_path)
    if r.subresource and rt.subresource(r.subresource) is None:
        raise errors.not_found_path()
    return r


def verb_of(method: str, r: Route, req: Request) -> str:
    if r.rt is None:
        return method.lower()
    if method in ("GET", "HEAD"):
        if r.watch_path or req.flag("watch"):
            return "watch"
        return "get" if r.name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if r.name else "deletecollection"
    return method.lower()


def _json_response(obj: Any, code: int = 200) -> Response:
    return Response(code, dumps(obj))


def _status_success(code: int = 200, details: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class Handlers:
    """Answers requests against one store. ``server_address`` feeds discovery (``/api``)."""

    def __init__(self, store: Store, *, version: dict[str, str], server_address: Callable[[], str]):
        self.store = store
        self.version = version
        self.server_address = server_address

    # ------------------------------------------------------------ discovery

    def special(self, r: Route, req: Request) -> Response:
        if req.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        what = r.special or ""
        if what == "version":
            return _json_response(self.version)
        if what == "health":
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if what == "api":
            return _json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.server_address()}],
                }
            )
        if what.startswith("openapi:"):
            gv = what[len("openapi:") :]
            if not gv:
                return _json_response(openapi.root(self.version["gitVersion"]))
            group, version = openapi.group_versions()[gv]
            return _json_response(openapi.document(group, version, self.version["gitVersion"]))
        if what == "apis":
            return _json_response(
                {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in resources.GROUPS]}
            )
        if what.startswith("group:"):
            return _json_response({"kind": "APIGroup", "apiVersion": "v1", **self._group(what[6:])})
        if what.startswith("groupversion:"):
            gv = what[len("groupversion:") :]
            group = gv.rpartition("/")[0]
            listed = [e for rt in resources.RESOURCES.values() if rt.group == group for e in rt.discovery()]
            listed.sort(key=lambda e: e["name"])
            return _json_response(
                {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": listed}
            )
        raise errors.not_found_path()

    @staticmethod
    def _group(group: str) -> dict[str, Any]:
        version = resources.GROUPS[group]
        gv = {"groupVersion": f"{group}/{version}", "version": version}
        return {"name": group, "versions": [gv], "preferredVersion": gv}

    # ------------------------------------------------------------ rendering

    @staticmethod
    def _out(rt: ResourceType, stored: Stored) -> dict[str, Any]:
        obj = stored.copy()
        return events.from_core(obj) if rt is resources.EVENTS_V1 else obj

    @staticmethod
    def _in(rt: ResourceType, obj: Any) -> Any:
        if rt is resources.EVENTS_V1 and isinstance(obj, dict):
            return events.to_core(obj)
        return obj

    def _object_bytes(self, rt: ResourceType, stored: Stored) -> bytes:
        if rt is resources.EVENTS_V1:
            return dumps(self._out(rt, stored))
        return stored.full_bytes()

    def _item_bytes(self, rt: ResourceType, stored: Stored) -> bytes:
        if rt is resources.EVENTS_V1:
            return dumps({k: v for k, v in self._out(rt, stored).items() if k not in ("kind", "apiVersion")})
        return stored.item_bytes()

    def _table(
        self, rt: ResourceType, req: Request, items: list[Stored], rv: int, token: str | None = None
    ) -> bytes | None:
        version = tables.wants_table(req.headers.get("accept", ""))
        if version is None:
            return None
        objs = [self._out(rt, s) for s in items]
        return dumps(
            tables.to_table(
                rt.kind,
                objs,
                resource_version=str(rv),
                now=self.store.clock(),
                version=version,
                include_object=req.q("includeObject") or "Metadata",
                continue_token=token,
            )
        )

    def _object_response(self, rt: ResourceType, req: Request, stored: Stored, code: int = 200) -> Response:
        table = self._table(rt, req, [stored], stored.rv)
        return Response(code, table if table is not None else self._object_bytes(rt, stored))

    @staticmethod
    def _body(req: Request) -> Any:
        ctype = req.headers.get("content-type", "application/json").split(";")[0].strip().lower()
        if ctype not in ("application/json", "*/*", ""):
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types "
                f'include: application/json (got "{ctype}")',
                "UnsupportedMediaType",
            )
        if not req.body:
            raise errors.bad_request("the request body is empty")
        try:
            return json.loads(req.body)
        except (ValueError, UnicodeDecodeError) as exc:
            raise errors.bad_request(f"the body of the request could not be decoded as JSON: {exc}") from None

    # ------------------------------------------------------------ resources

    def handle(self, r: Route, req: Request, verb: str) -> Response:
        if r.rt is None:
            return self.special(r, req)
        rt = r.rt
        if rt is resources.BINDINGS:
            if verb != "create" or r.name:
                raise errors.method_not_allowed()
            return self._bind(r, req, None)
        if r.subresource == "binding":
            if verb != "create":
                raise errors.method_not_allowed()
            return self._bind(r, req, r.name)
        allowed = rt.verbs if r.subresource is None else rt.subresource(r.subresource).verbs  # type: ignore
        if verb not in allowed or (r.subresource and verb in ("list", "watch")):
            raise errors.method_not_allowed()
        if rt.namespaced and r.name and not r.namespace:
            raise errors.not_found_path()
        if rt.namespaced and verb == "create" and not r.namespace:
            raise errors.method_not_allowed()
        dry_run = bool(req.query.get("dryRun"))
        storage = rt.storage
        if verb == "get":
            return self._object_response(rt, req, self.store.get_stored(storage, r.namespace, r.name or ""))
        if verb in ("list", "watch"):
            return self._list_or_watch(rt, r, req, verb)
        if verb == "create":
            stored = self.store.create_stored(storage, self._in(rt, self._body(req)), r.namespace, dry_run=dry_run)
            return self._object_response(rt, req, stored, 201)
        if verb == "update":
            body = self._body(req)
            if isinstance(body, dict):
                meta = body.get("metadata")
                if not isinstance(meta, dict):
                    meta = {}
                if meta.get("name") and meta["name"] != r.name:
                    raise errors.bad_request(
                        f"the name of the object ({meta['name']}) does not match the name on the URL ({r.name})"
                    )
                body.setdefault("metadata", {})["name"] = r.name
            stored, created = self.store.update_stored(
                storage, self._in(rt, body), r.namespace, subresource=r.subresource, dry_run=dry_run
            )
            return self._object_response(rt, req, stored, 201 if created else 200)
        if verb == "patch":
            ctype = req.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype == "application/apply-patch+yaml":
                raise ApiError(
                    415, "server-side apply is not supported by the simulated API server", "UnsupportedMediaType"
                )
            patch_type = PATCH_CONTENT_TYPES.get(ctype)
            if patch_type is None:
                raise errors.unsupported_media_type(ctype)
            view = (lambda o: events.from_core(o), events.to_core) if rt is resources.EVENTS_V1 else None
            stored = self.store.patch_stored(
                storage,
                r.namespace,
                r.name or "",
                req.body,
                patch_type,
                subresource=r.subresource,
                dry_run=dry_run,
                view=view,
            )
            return self._object_response(rt, req, stored)
        if verb == "delete":
            return self._delete(rt, r, req, dry_run)
        if verb == "deletecollection":
            return self._delete_collection(rt, r, req, dry_run)
        raise errors.method_not_allowed()

    def _bind(self, r: Route, req: Request, pod_name: str | None) -> Response:
        if not r.namespace:
            raise errors.not_found_path()
        body = self._body(req)
        if isinstance(body, dict) and body.get("kind") not in (None, "", "Binding"):
            raise errors.bad_request(f"the kind of the object ({body.get('kind')}) does not match Binding")
        self.store.bind_stored(r.namespace, body, pod_name)
        return _json_response(_status_success(201), 201)

    def _delete_options(self, req: Request) -> dict[str, Any]:
        opts: dict[str, Any] = {}
        if req.body:
            body = self._body(req)
            if isinstance(body, dict):
                opts = body
        grace = req.q("gracePeriodSeconds")
        if grace is not None:
            try:
                opts["gracePeriodSeconds"] = int(grace)
            except ValueError:
                raise errors.bad_request(f"invalid gracePeriodSeconds {grace!r}") from None
        if opts.get("dryRun"):
            opts["_dry"] = True
        return opts

    def _delete(self, rt: ResourceType, r: Route, req: Request, dry_run: bool) -> Response:
        opts = self._delete_options(req)
        stored, deleted = self.store.delete_stored(
            rt.storage,
            r.namespace,
            r.name or "",
            grace_period_seconds=opts.get("gracePeriodSeconds"),
            preconditions=opts.get("preconditions"),
            dry_run=dry_run or bool(opts.get("_dry")),
        )
        if deleted and not rt.return_deleted_object:
            meta = stored.obj["metadata"]
            details = {"name": meta["name"]}
            if rt.group:
                details["group"] = rt.group
            details.update({"kind": rt.plural, "uid": meta.get("uid", "")})
            body = _status_success(200, details)
            body.pop("code")
            return _json_response(body)
        return Response(200, self._object_bytes(rt, stored))

    def _delete_collection(self, rt: ResourceType, r: Route, req: Request, dry_run: bool) -> Response:
        fields, labels = compile_selectors(rt, req.q("fieldSelector"), req.q("labelSelector"))
        opts = self._delete_options(req)
        items, _, _, _ = self.store.list_stored(rt.storage, r.namespace, fields, labels)
        done = []
        for stored in items:
            try:
                last, _ = self.store.delete_stored(
                    rt.storage,
                    stored.namespace or None,
                    stored.name,
                    grace_period_seconds=opts.get("gracePeriodSeconds"),
                    dry_run=dry_run or bool(opts.get("_dry")),
                )
                done.append(last)
            except ApiError as exc:
                if exc.code != 404:
                    raise
        return Response(200, self._list_bytes(rt, done, self.store.resource_version, None, None))

    def _list_bytes(
        self, rt: ResourceType, items: list[Stored], rv: int, token: str | None, remaining: int | None
    ) -> bytes:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if token:
            meta["continue"] = token
        if remaining is not None:
            meta["remainingItemCount"] = remaining
        head = dumps({"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta})
        return head[:-1] + b',"items":[' + b",".join(self._item_bytes(rt, s) for s in items) + b"]}"

    def _list_or_watch(self, rt: ResourceType, r: Route, req: Request, verb: str) -> Response:
        fields, labels = compile_selectors(rt, req.q("fieldSelector"), req.q("labelSelector"))
        if r.name:  # watch of one object: GET .../pods/NAME?watch=1 or /watch/.../pods/NAME
            fields = FieldSelector(fields.requirements + (FieldRequirement("metadata.name", r.name, False),))
        if verb == "list":
            limit_text = req.q("limit")
            try:
                limit = int(limit_text) if limit_text else None
            except ValueError:
                raise errors.bad_request(f"invalid limit {limit_text!r}") from None
            items, rv, token, remaining = self.store.list_stored(
                rt.storage,
                r.namespace,
                fields,
                labels,
                limit=limit if limit and limit > 0 else None,
                continue_token=req.q("continue"),
                resource_version=req.q("resourceVersion"),
                resource_version_match=req.q("resourceVersionMatch"),
            )
            table = self._table(rt, req, items, rv, token)
            return Response(200, table if table is not None else self._list_bytes(rt, items, rv, token, remaining))
        timeout_text = req.q("timeoutSeconds")
        try:
            timeout = float(timeout_text) if timeout_text else None
        except ValueError:
            raise errors.bad_request(f"invalid timeoutSeconds {timeout_text!r}") from None
        send_initial = req.q("sendInitialEvents")
        bookmarks = req.flag("allowWatchBookmarks")
        watcher = self.store.watch(
            rt.storage,
            r.namespace,
            fields,
            labels,
            resource_version=req.q("resourceVersion"),
            send_initial_events=None if send_initial is None else req.flag("sendInitialEvents"),
            allow_bookmarks=bookmarks,
        )
        table_version = tables.wants_table(req.headers.get("accept", ""))
        return Response(
            200,
            watcher=watcher,
            render_event=lambda ev: self._event_line(rt, req, ev, table_version),
            timeout=timeout,
            bookmarks=bookmarks,
        )

    def _event_line(self, rt: ResourceType, req: Request, ev: WatchEvent, table_version: str | None) -> bytes:
        if ev.type == "ERROR":
            return dumps({"type": "ERROR", "object": ev.error}) + b"\n"
        if ev.type == "BOOKMARK":
            meta: dict[str, Any] = {"resourceVersion": str(ev.rv), "creationTimestamp": None}
            if ev.annotations:
                meta["annotations"] = ev.annotations
            return (
                dumps({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}})
                + b"\n"
            )
        assert ev.stored is not None
        if table_version is not None:
            obj = self._table(rt, req, [ev.stored], ev.stored.rv)
        else:
            obj = self._object_bytes(rt, ev.stored)
        return b'{"type":"' + ev.type.encode() + b'","object":' + (obj or b"{}") + b"}\n"
