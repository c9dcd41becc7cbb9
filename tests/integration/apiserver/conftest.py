"""Fixtures for talking to the simulated API server over real HTTP with the real client."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch

from vgpu.sim.apiserver import ApiServer


@pytest.fixture
def api_client(apiserver: ApiServer) -> Iterator[client.ApiClient]:
    api = apiserver.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


def pod_body(name: str, namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


class WatchStream:
    """Runs ``Watch().stream(...)`` in a thread; events (or the final exception) arrive on a queue."""

    END = object()

    def __init__(self, func: Any, **kwargs: Any):
        self.watch = watch.Watch()
        self.queue: queue.Queue[Any] = queue.Queue()
        self._thread = threading.Thread(target=self._run, args=(func,), kwargs=kwargs, daemon=True)
        self._thread.start()

    def _run(self, func: Any, **kwargs: Any) -> None:
        try:
            for event in self.watch.stream(func, **kwargs):
                self.queue.put(event)
        except Exception as exc:  # noqa: BLE001 - handed to the test
            self.queue.put(exc)
        finally:
            self.queue.put(self.END)

    def next(self, timeout: float = 5.0) -> Any:
        """The next event, the exception that ended the stream, or END."""
        return self.queue.get(timeout=timeout)

    def next_event(self, timeout: float = 5.0, skip_bookmarks: bool = True) -> dict[str, Any]:
        while True:
            item = self.next(timeout)
            if isinstance(item, Exception) or item is self.END:
                raise AssertionError(f"the watch ended instead of delivering an event: {item!r}")
            if skip_bookmarks and item["type"] == "BOOKMARK":
                continue
            return item

    def stop(self) -> None:
        self.watch.stop()
        self._thread.join(timeout=5)


@pytest.fixture
def streams() -> Iterator[list[WatchStream]]:
    """Watch streams a test opens; all are stopped at teardown."""
    opened: list[WatchStream] = []
    try:
        yield opened
    finally:
        for stream in opened:
            stream.stop()
