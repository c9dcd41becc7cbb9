"""The devices a CDI spec generator enumerates: index, UUID, device minor and MIG devices.

What ``nvidia-ctk cdi generate`` walks to name a node's devices (docs/cdi.md §4), read through
NVML once; the simulated node writes its CDI spec from it.  Read-only: nothing is changed.
"""

from __future__ import annotations

from typing import Any

import pynvml

from vgpu.nvml.library import init_pynvml


def device_inventory(library: str | None) -> tuple[str, list[dict[str, Any]]]:
    """(driver version, [{index, uuid, minor, migs: [{index, uuid}]}]) from the loaded NVML."""
    init_pynvml(library)
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            uuid = pynvml.nvmlDeviceGetUUID(h)
            gpu: dict[str, Any] = {
                "index": i,
                "uuid": uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                "minor": int(pynvml.nvmlDeviceGetMinorNumber(h)),
                "migs": [],
            }
            try:
                current, _pending = pynvml.nvmlDeviceGetMigMode(h)
            except pynvml.NVMLError:
                current = 0
            if current:
                for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
                    try:
                        m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, j)
                    except pynvml.NVMLError:
                        continue  # NOT_FOUND: no MIG device at this index
                    mu = pynvml.nvmlDeviceGetUUID(m)
                    gpu["migs"].append({"index": j, "uuid": mu.decode() if isinstance(mu, bytes) else str(mu)})
            gpus.append(gpu)
        return driver, gpus
    finally:
        pynvml.nvmlShutdown()
