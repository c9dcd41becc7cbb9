"""Every annotation key and fixed value of the Volcano ⇄ plugin protocol (docs/protocol.md §1).

One module holds the strings so that a typo cannot split the protocol between writer and reader.
"""

from __future__ import annotations

from typing import Final

# Node annotations
REGISTER: Final = "volcano.sh/node-vgpu-register"
HANDSHAKE: Final = "volcano.sh/node-vgpu-handshake"
NODE_LOCK: Final = "hamivgpu"
"""The node lock key is the bare string ``hamivgpu`` (docs/protocol.md §2.4)."""

# Pod annotations written by the scheduler (docs/protocol.md §3.2)
VGPU_NODE: Final = "volcano.sh/vgpu-node"
VGPU_TIME: Final = "volcano.sh/vgpu-time"
VGPU_IDS_NEW: Final = "volcano.sh/vgpu-ids-new"
DEVICES_TO_ALLOCATE: Final = "volcano.sh/devices-to-allocate"
BIND_PHASE: Final = "volcano.sh/bind-phase"
BIND_TIME: Final = "volcano.sh/bind-time"

SCHEDULER_ALLOCATION_KEYS: Final = (VGPU_NODE, VGPU_TIME, VGPU_IDS_NEW, DEVICES_TO_ALLOCATE, BIND_PHASE, BIND_TIME)
"""The six keys the scheduler writes at Allocate (docs/protocol.md §3.2)."""

# Pod annotations set by users, read by the scheduler (docs/protocol.md §3.4)
VGPU_MODE: Final = "volcano.sh/vgpu-mode"
USE_GPUTYPE: Final = "nvidia.com/use-gputype"
NOUSE_GPUTYPE: Final = "nvidia.com/nouse-gputype"
USE_GPUUUID: Final = "volcano.sh/vgpu-use-gpuuuid"
NOUSE_GPUUUID: Final = "volcano.sh/vgpu-nouse-gpuuuid"
PODGROUP_POLICY: Final = "volcano.sh/vgpu-podgroup-policy"
GROUP_NAME_KEYS: Final = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
"""PodGroup name keys; the first one present wins."""

# Values
BIND_PHASE_ALLOCATING: Final = "allocating"
BIND_PHASE_SUCCESS: Final = "success"
BIND_PHASE_FAILED: Final = "failed"
BIND_PHASES: Final = (BIND_PHASE_ALLOCATING, BIND_PHASE_SUCCESS, BIND_PHASE_FAILED)

VGPU_TIME_DONE: Final = "18446744073709551615"
"""``vgpu-time`` once the plugin is done with the pod (2^64 − 1)."""

DEVICE_TYPE: Final = "NVIDIA"
"""The literal type field of every PodDevices device."""

MODE_HAMI_CORE: Final = "hami-core"
MODE_MIG: Final = "mig"
MODES: Final = (MODE_HAMI_CORE, MODE_MIG)

PODGROUP_POLICY_SPREAD: Final = "spread"

# Keys that belong to HAMi's own scheduler; Volcano never reads them (docs/failures.md R-3).
HAMI_REGISTER: Final = "hami.io/node-nvidia-register"
HAMI_HANDSHAKE: Final = "hami.io/node-handshake"

# Lock names of older plugins; we never release them (docs/protocol.md §2.4).
LEGACY_NODE_LOCKS: Final = ("vgpu", "vgpu4pd", "gpu")
