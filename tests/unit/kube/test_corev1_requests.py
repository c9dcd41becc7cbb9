"""``CoreV1`` serialises each call exactly as the generated ``CoreV1Api`` method does.

The daemons avoid importing the generated module (its ~250 models cost 0.2-0.4 s of startup);
this compares the request tuples (method, URL with query, headers, body) both produce, call by
call, with the arguments KubeClient passes, and checks that the daemons never load it.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from kubernetes import client as k8s

from vgpu.kube.client import STRATEGIC_MERGE, CoreV1
from vgpu.kube.events import build_event, node_reference

BODY = {"metadata": {"annotations": {"a": "b"}}}
CALLS: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("read_node", ("node-1",), {}),
    ("list_node", (), {}),
    ("list_node", (), {"field_selector": "metadata.name=node-1"}),
    (
        "list_node",
        (),
        {
            "watch": True,
            "allow_watch_bookmarks": True,
            "timeout_seconds": 300,
            "resource_version": "17",
            "field_selector": "metadata.name=n",
        },
    ),
    ("patch_node", ("node-1", BODY), {"_content_type": STRATEGIC_MERGE}),
    ("patch_node", ("node/with space", BODY), {}),
    ("read_namespaced_pod", ("pod-1", "ns-1"), {}),
    ("list_pod_for_all_namespaces", (), {"field_selector": "spec.nodeName=n1", "label_selector": "a=b"}),
    (
        "list_pod_for_all_namespaces",
        (),
        {"watch": True, "allow_watch_bookmarks": True, "timeout_seconds": 300, "resource_version": "5"},
    ),
    ("patch_namespaced_pod", ("pod-1", "ns-1", BODY), {"_content_type": STRATEGIC_MERGE}),
    ("list_namespaced_event", ("ns-1",), {"field_selector": "involvedObject.name=p,involvedObject.kind=Pod"}),
    (
        "create_namespaced_event",
        ("default", build_event(node_reference("node-1"), "Warning", "GPUUnhealthy", "XID 79", "node-1", 1.5e9)),
        {},
    ),
    ("patch_namespaced_event", ("ev-1", "ns-1", {"count": 2}), {"_content_type": STRATEGIC_MERGE}),
]


class _Captured(Exception):
    pass


@pytest.fixture
def api_client(monkeypatch):
    cfg = k8s.Configuration()
    cfg.host = "https://api.example:6443"
    cfg.api_key = {"BearerToken": "t0ken"}
    cfg.api_key_prefix = {"BearerToken": "Bearer"}
    api = k8s.ApiClient(cfg)
    seen: list[Any] = []

    def capture(request, types, async_req, preload, timeout, data_only):
        seen.append((request, preload, timeout))
        raise _Captured

    monkeypatch.setattr(api, "_call_with_legacy_options", capture)
    api.seen = seen  # type: ignore[attr-defined]
    yield api
    api.close()


@pytest.mark.parametrize(("method", "args", "kw"), CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(CALLS)])
def test_same_request_as_the_generated_method(api_client, method, args, kw):
    generated = k8s.CoreV1Api(api_client)
    ours = CoreV1(api_client)
    for api in (generated, ours):
        with pytest.raises(_Captured):
            getattr(api, method)(*args, _preload_content=False, _request_timeout=7.5, **kw)
    want, got = api_client.seen
    assert got == want


def test_unknown_arguments_are_refused(api_client):
    with pytest.raises(TypeError, match="no_such"):
        CoreV1(api_client).list_node(no_such=1, _preload_content=False)
    with pytest.raises(TypeError, match="_preload_content"):
        CoreV1(api_client).read_node("n")


def test_the_daemons_do_not_load_the_generated_api():
    code = (
        "import sys, vgpu.plugin.daemon, vgpu.monitor.daemon\n"
        "from vgpu.kube.client import KubeClient\n"
        "from kubernetes import client as k8s\n"
        "c = k8s.Configuration(); c.host = 'http://127.0.0.1:1'\n"
        "KubeClient(c).close()\n"
        "print('kubernetes.client.api.core_v1_api' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"
