"""Dynamic MIG against the fake NVML's MIG simulation, one child process per node.

A process keeps one NVML library (and the fake its configuration) loaded, so every test
drives a child Python process started with the fake's env (the same child protocol as the
NVML integration tests).  In the child, ``node`` is a :class:`tests.integration.mig.node.Node`:
the real ``MigManager`` plus a raw-NVML view of the GPU.  MIG state lives in the fake's state
file, so a second child (a "restarted plugin") sees what the first one left.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from tests.integration.nvml.conftest import ChildError, NvmlChild
from vgpu.config.mig_defaults import DEFAULT_KNOWN_MIG_GEOMETRIES, geometries_as_data
from vgpu.sim.nvml import fakenvml

A100 = "NVIDIA A100-SXM4-80GB"
H200 = "NVIDIA H200 141GB HBM3e"
A30 = "NVIDIA A30"

# docs/mig.md §2.1 suggested H200 entry, with NVML's instance sizes as the memory values.
H200_ENTRY = {
    "models": ["H200 141GB"],
    "allowedGeometries": [
        {"group": "group1", "geometries": [{"name": "1g.18gb", "memory": 18432, "count": 7}]},
        {
            "group": "group2",
            "geometries": [
                {"name": "2g.35gb", "memory": 35840, "count": 3},
                {"name": "1g.18gb", "memory": 18432, "count": 1},
            ],
        },
        {"group": "group3", "geometries": [{"name": "3g.71gb", "memory": 72704, "count": 2}]},
        {"group": "group4", "geometries": [{"name": "7g.141gb", "memory": 144384, "count": 1}]},
    ],
}


def device_config(entries: list[dict[str, Any]] | None = None) -> str:
    """``device-config.yaml`` text: the shipped geometries plus the H200 entry (or ``entries``)."""
    data = entries if entries is not None else geometries_as_data(DEFAULT_KNOWN_MIG_GEOMETRIES) + [H200_ENTRY]
    return yaml.safe_dump({"nvidia": {"knownMigGeometries": data}}, sort_keys=False)


class MigChild:
    """A child process holding ``node``; ``call("apply(0, 'group1')")`` evaluates ``node.apply(...)``."""

    def __init__(self, fake: fakenvml.FakeNvml, config_text: str | None, startup: bool) -> None:
        setup = f"from tests.integration.mig.node import Node\nnode = Node({config_text!r})\n"
        self.child = NvmlChild(fake.env, setup)
        self.startup_report = self.call("startup()") if startup else None

    def call(self, expression: str) -> Any:
        return self.child.eval(f"node.{expression}")

    def close(self) -> str:
        return self.child.close()


@pytest.fixture
def mig_node(tmp_path: pathlib.Path) -> Iterator[Callable[..., tuple[fakenvml.FakeNvml, MigChild]]]:
    """Factory: ``mig_node([devices], config_text=...)`` → (fake, child); ``restart(fake)`` starts
    another child on the same fake (same MIG state).  Every child is stopped at teardown."""
    children: list[MigChild] = []
    configs: dict[pathlib.Path, str | None] = {}  # device-config text per fake (by its config file)

    def start(
        devices: list[dict[str, Any]] | None = None, *, config_text: str | None = device_config(), startup: bool = True
    ) -> tuple[fakenvml.FakeNvml, MigChild]:
        fake = fakenvml.FakeNvml.create(tmp_path / f"nvml{len(children)}", devices or [fakenvml.device(0, name=A100)])
        child = MigChild(fake, config_text, startup)
        children.append(child)
        configs[fake.config_path] = config_text
        return fake, child

    def restart(fake: fakenvml.FakeNvml, startup: bool = True) -> MigChild:
        child = MigChild(fake, configs[fake.config_path], startup)
        children.append(child)
        return child

    start.restart = restart  # type: ignore[attr-defined]
    yield start
    for child in children:
        child.close()


__all__ = ["A100", "A30", "H200", "ChildError", "device_config"]
