"""The two watch-backed caches the plugin keeps: this node's pods and this Node.

Both are scoped by a field selector, so the plugin never LISTs or watches the whole cluster
(docs/decisions.md decision 6; the benchmark in benchmarks/test_allocate.py shows what that saves).
"""

from __future__ import annotations

from vgpu.kube.client import KubeClient
from vgpu.kube.watchcache import Listener, WatchCache, name_key, uid_key


def node_pod_selector(node_name: str) -> str:
    return f"spec.nodeName={node_name}"


def node_pod_cache(client: KubeClient, node_name: str, listener: Listener | None = None) -> WatchCache:
    """Pods bound to ``node_name`` (all namespaces), keyed by UID."""
    sel = node_pod_selector(node_name)
    return WatchCache(
        f"pods on {node_name}",
        lambda: client.list_pods(field_selector=sel),
        lambda rv: client.watch_pods(field_selector=sel, resource_version=rv),
        key=uid_key,
        listener=listener,
    )


def node_cache(client: KubeClient, node_name: str, listener: Listener | None = None) -> WatchCache:
    """The one Node called ``node_name``, keyed by name."""
    sel = f"metadata.name={node_name}"
    return WatchCache(
        f"node {node_name}",
        lambda: client.list_nodes(field_selector=sel),
        lambda rv: client.watch_nodes(field_selector=sel, resource_version=rv),
        key=name_key,
        listener=listener,
    )
