"""A thin, dict-based layer over the official ``kubernetes`` client.

Why a layer: the plugin touches only a handful of endpoints (RBAC, docs/configuration.md §6: nodes
get/list/watch/patch/update, pods get/list/watch/patch, events create/patch), and it wants
plain JSON dicts, not generated model objects — deserialising ``V1Pod`` models costs more than
the whole Allocate decision.  Every call therefore goes through the official ``ApiClient`` (auth,
TLS and the REST layer stay the official client's) with ``_preload_content=False``, and the body
is decoded with ``json.loads``.  The requests are serialised by :class:`CoreV1`, which makes the
nine ``CoreV1Api`` calls the daemons use exactly as the generated methods do, without importing
that module: it loads ~250 generated model classes, 0.2-0.4 s of every daemon's startup.

All annotation patches are strategic-merge patches (docs/protocol.md §1); the body is built
by :func:`vgpu.protocol.annotations_patch` (a ``None`` value deletes a key).

Errors: :class:`KubeApiError` carries the HTTP status of a refused request; connection
problems (server down, reset, timeout) become :class:`KubeUnavailable`.  Both subclass
:class:`KubeError`, so callers can treat "the API did not do it" uniformly.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Final

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from vgpu.protocol import annotations_patch

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
DEFAULT_TIMEOUT_S = 10.0
"""Connect/read timeout of ordinary requests: an Allocate must not hang on a dead API server."""
WATCH_READ_TIMEOUT_S = 330.0
"""Read timeout of a watch: longer than the server-side ``timeoutSeconds`` we ask for."""
WATCH_SERVER_TIMEOUT_S = 300
MIN_CALL_S = 0.05
"""Under a deadline, a call is not started with less time than this left."""


class KubeError(Exception):
    """The API server did not do what we asked."""


class KubeApiError(KubeError):
    """A request the API server answered with an error status."""

    def __init__(self, what: str, status: int, reason: str, message: str = ""):
        self.status = status
        self.reason = reason
        self.api_message = message
        text = f"{what}: HTTP {status} {reason}"
        if message:
            text += f": {message}"
        super().__init__(text)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        """410: the resourceVersion is too old (after compaction); the caller must re-list."""
        return self.status == 410


class KubeUnavailable(KubeError):
    """The API server could not be reached (refused, reset, timed out)."""


class KubeDeadlineExceeded(KubeUnavailable):
    """The calling thread's time budget (:meth:`KubeClient.deadline`) is used up; not retried."""


class KubeConfigError(KubeError):
    """No usable Kubernetes client configuration."""


def _api_error(what: str, exc: ApiException) -> KubeApiError:
    message = ""
    body = exc.body
    if body:
        try:
            doc = json.loads(body)
            message = str(doc.get("message", "")) if isinstance(doc, dict) else ""
        except (ValueError, TypeError):
            message = body[:200] if isinstance(body, str) else ""
    return KubeApiError(what, int(exc.status or 0), str(exc.reason or ""), message)


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error as one line: what is wrong and where (the library's text spans several lines)."""
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if problem and mark is not None:
        return f"not valid YAML: {problem} at line {mark.line + 1}, column {mark.column + 1}"
    return "not valid YAML: " + " ".join(str(exc).split())


def _load_kubeconfig(path: str, cfg: k8s.Configuration, context: str | None, source: str) -> None:
    where = path if source == path else f"{path} (from {source})"
    if not any(os.path.exists(os.path.expanduser(p)) for p in path.split(os.pathsep) if p):
        raise KubeConfigError(f"cannot load kubeconfig {where}: no such file")
    try:
        k8s_config.load_kube_config(
            config_file=path, context=context or None, client_configuration=cfg, persist_config=False
        )
    except yaml.YAMLError as exc:
        raise KubeConfigError(f"cannot load kubeconfig {where}: {_yaml_problem(exc)}") from None
    except (ConfigException, OSError, TypeError, ValueError, AttributeError, KeyError) as exc:
        text = " ".join(str(exc).split()) or type(exc).__name__
        raise KubeConfigError(f"cannot load kubeconfig {where}: {text}") from None


def load_configuration(kubeconfig: str | None, *, context: str | None = None) -> k8s.Configuration:
    """``--kubeconfig``/``KUBECONFIG`` when given, else the in-cluster service account (docs/decisions.md decision 1).

    A ``KUBECONFIG``-style list of files (``a:b``) is merged like kubectl does.
    Raises :class:`KubeConfigError` naming what was tried; a malformed file is one line naming
    the file, the line and the column, never a traceback.
    """
    cfg = k8s.Configuration()
    if kubeconfig:
        _load_kubeconfig(kubeconfig, cfg, context, kubeconfig)
        return cfg
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except ConfigException as exc:
        raise KubeConfigError(
            f"no kubeconfig given (--kubeconfig / KUBECONFIG) and no in-cluster service account: {exc}"
        ) from None
    return cfg


def find_user_kubeconfig(flag: str | None, environ: Mapping[str, str]) -> tuple[str | None, str]:
    """The kubeconfig a person's tool uses, found as kubectl finds it: (path or None, where from).

    ``--kubeconfig``, else ``KUBECONFIG`` (a list, merged), else ``~/.kube/config`` when it
    exists, else (None, "in-cluster").  The daemons do not use this: they never read a home
    directory (docs/decisions.md decision 1).
    """
    if flag:
        return flag, "--kubeconfig"
    if environ.get("KUBECONFIG"):
        return environ["KUBECONFIG"], "KUBECONFIG"
    home = environ.get("HOME") or os.path.expanduser("~")
    default = os.path.join(home, ".kube", "config")
    if os.path.exists(default):
        return default, "~/.kube/config"
    return None, "in-cluster"


def load_user_configuration(
    flag: str | None, environ: Mapping[str, str], *, context: str | None = None
) -> k8s.Configuration:
    """:func:`find_user_kubeconfig`, then load it (``context``: kubectl's ``--context``)."""
    path, source = find_user_kubeconfig(flag, environ)
    cfg = k8s.Configuration()
    if path is not None:
        _load_kubeconfig(path, cfg, context, source)
        return cfg
    try:
        k8s_config.load_incluster_config(client_configuration=cfg)
    except ConfigException:
        raise KubeConfigError(
            "no cluster found: no --kubeconfig, no KUBECONFIG, no ~/.kube/config and not running in a pod"
        ) from None
    return cfg


def in_cluster_available() -> bool:
    """True when the in-cluster service-account configuration can be loaded."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


@dataclass(frozen=True)
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str


class WatchStream:
    """One open watch: iterate decoded events (``{"type":…, "object":{…}}``); ``close()`` from any thread."""

    def __init__(self, response: Any, what: str):
        self._resp = response
        self._what = what
        self._closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in self._resp.stream(amt=None, decode_content=False):
                buffer += chunk
                while (nl := buffer.find(b"\n")) != -1:
                    line, buffer = buffer[:nl], buffer[nl + 1 :]
                    if line.strip():
                        try:
                            yield json.loads(line)
                        except ValueError:
                            raise KubeUnavailable(f"{self._what}: undecodable watch event {line[:120]!r}") from None
        except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            if self._closed:
                return
            raise KubeUnavailable(f"{self._what}: watch stream failed: {exc}") from None
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            shutdown = getattr(self._resp, "shutdown", None)
            if shutdown is not None:
                shutdown()
            self._resp.release_conn()
            self._resp.close()
        except Exception:  # noqa: BLE001 - closing a dead stream must never raise
            pass


_ACCEPT = "application/json"  # what the generated methods' select_header_accept picks for every call here
# Query parameters of the generated list methods, in their order: (keyword, query name).
_LIST_QUERY: Final = (
    ("pretty", "pretty"),
    ("allow_watch_bookmarks", "allowWatchBookmarks"),
    ("_continue", "continue"),
    ("field_selector", "fieldSelector"),
    ("label_selector", "labelSelector"),
    ("limit", "limit"),
    ("resource_version", "resourceVersion"),
    ("resource_version_match", "resourceVersionMatch"),
    ("send_initial_events", "sendInitialEvents"),
    ("shard_selector", "shardSelector"),
    ("timeout_seconds", "timeoutSeconds"),
    ("watch", "watch"),
)
# list_pod_for_all_namespaces names ``pretty`` after ``limit``.
_ALL_PODS_QUERY: Final = (*_LIST_QUERY[1:6], _LIST_QUERY[0], *_LIST_QUERY[6:])
_PATCH_QUERY: Final = (
    ("pretty", "pretty"),
    ("dry_run", "dryRun"),
    ("field_manager", "fieldManager"),
    ("field_validation", "fieldValidation"),
    ("force", "force"),
)
_CREATE_QUERY: Final = _PATCH_QUERY[:4]
_READ_QUERY: Final = _PATCH_QUERY[:1]
# The generated patch methods' default Content-Type (the REST layer turns it into a
# strategic-merge patch for a dict body); every KubeClient patch names its type anyway.
_JSON_PATCH = "application/json-patch+json"


class CoreV1:
    """The ``CoreV1Api`` methods KubeClient calls, under their generated names and signatures,
    serialised as the generated code does (``ApiClient.param_serialize``: path quoting, query
    order, BearerToken auth; ``Accept: application/json``) and sent through the same
    ``ApiClient`` call, raw responses only (``_preload_content=False``).  Non-2xx answers raise
    ``ApiException`` as the generated methods do."""

    def __init__(self, api_client: k8s.ApiClient):
        self.api_client = api_client

    def _send(
        self,
        method: str,
        path: str,
        path_params: dict[str, str],
        names: tuple[tuple[str, str], ...],
        kw: dict[str, Any],
        body: Any = None,
        content_type: str | None = None,
    ) -> Any:
        preload = kw.pop("_preload_content", True)
        timeout = kw.pop("_request_timeout", None)
        if content_type is not None:
            content_type = kw.pop("_content_type", None) or content_type
        known = {k for k, _ in names}
        unknown = set(kw) - known
        if unknown or preload:
            what = ", ".join(sorted(unknown)) if unknown else "_preload_content=True"
            raise TypeError(f"CoreV1 {method} {path}: unsupported argument(s) {what}")
        query = [(q, kw[k]) for k, q in names if kw.get(k) is not None]
        headers = {"Accept": _ACCEPT}
        if content_type is not None:
            headers["Content-Type"] = content_type
        request = self.api_client.param_serialize(
            method=method,
            resource_path=path,
            path_params=path_params,
            query_params=query,
            header_params=headers,
            body=body,
            post_params=[],
            files={},
            auth_settings=["BearerToken"],
            collection_formats={},
            _host=None,
            _request_auth=None,
        )
        return self.api_client._call_with_legacy_options(request, {}, False, False, timeout, False)

    def read_node(self, name: str, **kw: Any) -> Any:
        return self._send("GET", "/api/v1/nodes/{name}", {"name": name}, _READ_QUERY, kw)

    def list_node(self, **kw: Any) -> Any:
        return self._send("GET", "/api/v1/nodes", {}, _LIST_QUERY, kw)

    def patch_node(self, name: str, body: Any, **kw: Any) -> Any:
        return self._send("PATCH", "/api/v1/nodes/{name}", {"name": name}, _PATCH_QUERY, kw, body, _JSON_PATCH)

    def read_namespaced_pod(self, name: str, namespace: str, **kw: Any) -> Any:
        path = "/api/v1/namespaces/{namespace}/pods/{name}"
        return self._send("GET", path, {"name": name, "namespace": namespace}, _READ_QUERY, kw)

    def list_pod_for_all_namespaces(self, **kw: Any) -> Any:
        return self._send("GET", "/api/v1/pods", {}, _ALL_PODS_QUERY, kw)

    def patch_namespaced_pod(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        path = "/api/v1/namespaces/{namespace}/pods/{name}"
        return self._send("PATCH", path, {"name": name, "namespace": namespace}, _PATCH_QUERY, kw, body, _JSON_PATCH)

    def list_namespaced_event(self, namespace: str, **kw: Any) -> Any:
        path = "/api/v1/namespaces/{namespace}/events"
        return self._send("GET", path, {"namespace": namespace}, _LIST_QUERY, kw)

    def create_namespaced_event(self, namespace: str, body: Any, **kw: Any) -> Any:
        # The generated method validates the body into the CoreV1Event model (its timestamps
        # are re-serialised as +00:00, keys sorted); the same model, loaded here only.
        from kubernetes.client.models.core_v1_event import CoreV1Event

        if isinstance(body, dict):
            body = CoreV1Event.model_validate(body)
        path = "/api/v1/namespaces/{namespace}/events"
        return self._send("POST", path, {"namespace": namespace}, _CREATE_QUERY, kw, body)

    def patch_namespaced_event(self, name: str, namespace: str, body: Any, **kw: Any) -> Any:
        path = "/api/v1/namespaces/{namespace}/events/{name}"
        return self._send("PATCH", path, {"name": name, "namespace": namespace}, _PATCH_QUERY, kw, body, _JSON_PATCH)


class KubeClient:
    """The plugin's API access; thread-safe (one urllib3 pool, no shared mutable state)."""

    def __init__(
        self,
        configuration: k8s.Configuration,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        user_agent: str = "vgpu-device-plugin",
    ):
        # Retries are ours (call_with_retries, the retry queue, watch re-lists): urllib3's default
        # silent read retries would turn one timed-out GET into four, past any time budget.
        configuration.retries = 0
        self.configuration = configuration
        self.timeout = timeout
        self.api_client = k8s.ApiClient(configuration)
        self.api_client.user_agent = user_agent
        self.core = CoreV1(self.api_client)
        self._closed = threading.Event()
        self._local = threading.local()  # per-thread deadline (monotonic), see deadline()
        self.observe: Callable[[str, bool], None] | None = None
        """Called with (verb, succeeded) after every request (the plugin's API-write metrics)."""

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None, **kw: Any) -> KubeClient:
        return cls(load_configuration(kubeconfig), **kw)

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self.api_client.close()

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Bound every call this thread makes inside the block to ``seconds`` in total.

        The kubelet waits on Allocate, which must not block for more than about 10 s overall
        (docs/kubelet-api.md §6): each request's timeout is cut to the time left, and
        once it is used up calls fail at once with :class:`KubeDeadlineExceeded` (callers then
        hand the write to their background retry queue).  Nested blocks keep the earlier end.
        """
        previous = getattr(self._local, "deadline", None)
        end = time.monotonic() + seconds
        self._local.deadline = end if previous is None else min(previous, end)
        try:
            yield
        finally:
            self._local.deadline = previous

    def _request_timeout(self, what: str, timeout: float | None) -> float:
        base = timeout or self.timeout
        end = getattr(self._local, "deadline", None)
        if end is None:
            return base
        left = end - time.monotonic()
        if left < MIN_CALL_S:
            raise KubeDeadlineExceeded(f"{what}: not attempted, the Allocate time budget is used up")
        return min(base, left)

    # ---------------------------------------------------------------- plumbing

    def _call(self, what: str, fn: Any, *args: Any, timeout: float | None = None, **kw: Any) -> dict[str, Any]:
        if self.observe is None:
            return self._request(what, fn, *args, timeout=timeout, **kw)
        verb = what.partition(" ")[0]  # every `what` starts with its verb: "patch node n1"
        try:
            doc = self._request(what, fn, *args, timeout=timeout, **kw)
        except KubeError:
            self.observe(verb, False)
            raise
        self.observe(verb, True)
        return doc

    def _request(self, what: str, fn: Any, *args: Any, timeout: float | None = None, **kw: Any) -> dict[str, Any]:
        request_timeout = self._request_timeout(what, timeout)
        try:
            resp = fn(*args, _preload_content=False, _request_timeout=request_timeout, **kw)
            data = resp.data
        except ApiException as exc:
            raise _api_error(what, exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeUnavailable(f"{what}: API server {self.host} unreachable: {exc}") from None
        try:
            doc = json.loads(data)
        except ValueError:
            raise KubeUnavailable(f"{what}: undecodable response {data[:120]!r}") from None
        if not isinstance(doc, dict):
            raise KubeUnavailable(f"{what}: unexpected response {data[:120]!r}")
        return doc

    def _watch(self, what: str, fn: Any, **kw: Any) -> WatchStream:
        try:
            resp = fn(
                watch=True,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SERVER_TIMEOUT_S,
                _preload_content=False,
                _request_timeout=(self.timeout, WATCH_READ_TIMEOUT_S),
                **kw,
            )
        except ApiException as exc:
            raise _api_error(what, exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise KubeUnavailable(f"{what}: API server {self.host} unreachable: {exc}") from None
        return WatchStream(resp, what)

    @staticmethod
    def _list_result(doc: dict[str, Any]) -> ListResult:
        return ListResult(list(doc.get("items") or []), str((doc.get("metadata") or {}).get("resourceVersion", "")))

    # ---------------------------------------------------------------- nodes

    def get_node(self, name: str) -> dict[str, Any]:
        return self._call(f"get node {name}", self.core.read_node, name)

    def list_nodes(self, *, field_selector: str | None = None) -> ListResult:
        kw: dict[str, Any] = {"field_selector": field_selector} if field_selector else {}
        return self._list_result(self._call("list nodes", self.core.list_node, **kw))

    def watch_nodes(self, *, field_selector: str | None, resource_version: str) -> WatchStream:
        kw = {"field_selector": field_selector} if field_selector else {}
        return self._watch("watch nodes", self.core.list_node, resource_version=resource_version, **kw)

    def patch_node_annotations(self, name: str, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        """Strategic-merge patch of the node's annotations; returns the patched Node."""
        return self.patch_node(name, annotations_patch(annotations))

    def patch_node(self, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(f"patch node {name}", self.core.patch_node, name, body, _content_type=STRATEGIC_MERGE)

    # ---------------------------------------------------------------- pods

    def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self._call(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)

    def list_pods(self, *, field_selector: str | None = None, label_selector: str | None = None) -> ListResult:
        """Pods of all namespaces (``field_selector`` e.g. ``spec.nodeName=n1``)."""
        kw: dict[str, Any] = {}
        if field_selector:
            kw["field_selector"] = field_selector
        if label_selector:
            kw["label_selector"] = label_selector
        what = f"list pods ({field_selector})" if field_selector else "list pods (all namespaces)"
        return self._list_result(self._call(what, self.core.list_pod_for_all_namespaces, **kw))

    def watch_pods(self, *, field_selector: str | None, resource_version: str) -> WatchStream:
        kw = {"field_selector": field_selector} if field_selector else {}
        return self._watch("watch pods", self.core.list_pod_for_all_namespaces, resource_version=resource_version, **kw)

    def patch_pod_annotations(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> dict[str, Any]:
        """Strategic-merge patch of a pod's annotations; returns the patched Pod."""
        return self._call(
            f"patch pod {namespace}/{name}",
            self.core.patch_namespaced_pod,
            name,
            namespace,
            annotations_patch(annotations),
            _content_type=STRATEGIC_MERGE,
        )

    # ---------------------------------------------------------------- events

    def list_events(self, namespace: str, *, field_selector: str | None = None) -> ListResult:
        """core/v1 Events of ``namespace`` (e.g. ``involvedObject.name=p,involvedObject.kind=Pod``)."""
        kw: dict[str, Any] = {"field_selector": field_selector} if field_selector else {}
        return self._list_result(
            self._call(f"list events in {namespace}", self.core.list_namespaced_event, namespace, **kw)
        )

    def create_event(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._call(f"create event in {namespace}", self.core.create_namespaced_event, namespace, body)

    def patch_event(self, namespace: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        """Strategic-merge patch of an Event (the recorder's repeat: ``count``, ``lastTimestamp``)."""
        return self._call(
            f"patch event {namespace}/{name}",
            self.core.patch_namespaced_event,
            name,
            namespace,
            body,
            _content_type=STRATEGIC_MERGE,
        )
