"""Every bound on the two configuration files, in one place (docs/configuration.md §2.2, §2.4).

Operators write these files, and a typo or a hostile ConfigMap must fail with a clear error at
startup (or on SIGHUP), not exhaust the 512 MiB container later: a 1.3 KB file of YAML aliases
expanded to gigabytes, a 5,000-digit integer raised inside Python's ``int()``, and a MIG
``count: 100000000000`` passed validation and then built a list of that many positions.  So the
text, its expanded size, the length of each number as written and every number's value are
checked before anything uses them.  The maxima are far above any real GPU (a few MIG instances,
tens of vGPU tasks per card); they only stop absurd values.
"""

from __future__ import annotations

from typing import Final

MAX_CONFIG_BYTES: Final = 1 << 20
"""1 MiB: the most a ConfigMap (both files share one) can hold."""
MAX_YAML_NODES: Final = 100_000
"""Nodes of the YAML document with every alias expanded (each use counted); the shipped
device-config.yaml has about 200."""
MAX_NUMBER_CHARS: Final = 64
"""A number written with more characters is refused unread (int64 needs 20)."""

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
"""The range of the Go ``int`` fields HAMi reads (``defaultMemory``, ``defaultCores``, ``defaultGPUNum``)."""

MAX_SPLIT_COUNT: Final = 1024
"""``deviceSplitCount`` / ``devicesplitcount``: vgpu-number IDs (tasks) per GPU."""
MAX_GPU_MEMORY_FACTOR: Final = 1 << 20
"""``gpuMemoryFactor``: MiB per vgpu-memory unit (1 TiB)."""
MAX_SCALING: Final = 100.0
"""``deviceCoreScaling`` (at most 10,000 vgpu-cores IDs per GPU) and ``deviceMemoryScaling``."""
MAX_HEALTH_RECOVERY_SECONDS: Final = 365 * 86_400
"""``healthRecoverySeconds``: one year (0 means never)."""
MAX_MIG_MEMORY_MIB: Final = 1 << 20
"""A MIG template's ``memory``: 1 TiB."""
MAX_MIG_INSTANCES: Final = 64
"""A MIG template's ``count``, and the instances of one group together (NVIDIA GPUs have 7)."""
MAX_GPU_INDEX: Final = 1 << 16
"""``filterdevices.index``: host NVML indices."""
