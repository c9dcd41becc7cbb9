"""The failures of dynamic MIG, each with the exact text an operator sees (docs/mig.md §5).

Every message names the GPU (UUID) and what blocked the operation, because it ends up in the
pod's ``VGPUAllocationFailed`` Event and the kubelet's ``UnexpectedAdmissionError``.  No MIG
failure ever ends the plugin process (docs/failures.md G-2: upstream exits).
"""

from __future__ import annotations


class MigError(Exception):
    """Base class: a MIG operation on one GPU failed; the message is user-facing."""


class MigConfigError(MigError):
    """The geometry cannot be used on this GPU: unknown profile name or an infeasible group."""


class MigPositionError(MigError):
    """``unknown MIG group/position <id>``: the id names no slot of the GPU's geometry."""


class MigGuardError(MigError):
    """A live assignment on the node conflicts with this one (docs/mig.md §5.2 step 2)."""


class MigInUseError(MigError):
    """An instance that must go has processes: ``MIG instance GI <id> on <uuid> is in use; not reshaping``."""

    def __init__(self, uuid: str, gi_id: int, detail: str = "") -> None:
        self.uuid = uuid
        self.gi_id = gi_id
        text = f"MIG instance GI {gi_id} on {uuid} is in use; not reshaping"
        super().__init__(f"{text} ({detail})" if detail else text)


class MigApplyError(MigError):
    """``MIG apply failed on <uuid>: <nvml error>``; what this apply created was rolled back."""

    def __init__(self, uuid: str, cause: object) -> None:
        self.uuid = uuid
        self.cause = cause
        super().__init__(f"MIG apply failed on {uuid}: {cause}")


class MigResolveError(MigError):
    """A position's instance or MIG device could not be found after an apply."""


class MigGpuUnavailable(MigError):
    """The GPU is not usable for MIG on this node (excluded at startup, or not found)."""
