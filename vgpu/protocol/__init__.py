"""Pure encode/decode of every Volcano annotation (no I/O).

Modules: :mod:`keys` (every key and fixed value), :mod:`register` (node register records),
:mod:`handshake`, :mod:`nodelock` (``hamivgpu``), :mod:`pod_devices` (``vgpu-ids-new`` /
``devices-to-allocate``), :mod:`pod` (bind phase, vgpu-time, the annotation sets each side writes),
:mod:`pod_model` (what a pod asks of vGPU: its vGPU containers and the fields Allocate matches on).
Strict decoders raise :class:`ProtocolError`; the ``*_as_volcano`` decoders reproduce what a Volcano
scheduler accepts, for the scheduler emulator.
"""
from vgpu.protocol import keys
from vgpu.protocol.errors import ProtocolError
from vgpu.protocol.handshake import (
    HANDSHAKE_TIMEOUT,
    Handshake,
    decode_handshake,
    encode_deleted,
    encode_reported,
    encode_requesting,
    volcano_handshake_state,
    volcano_requesting_stamp,
)
from vgpu.protocol.nodelock import (
    NODE_LOCK_TTL,
    decode_node_lock,
    encode_node_lock,
    node_lock_expired,
    node_lock_release_patch,
)
from vgpu.protocol.pod import (
    VGPU_TIME_INFINITY,
    allocation_failed,
    allocation_progress,
    allocation_success,
    annotations_patch,
    decode_bind_phase,
    decode_vgpu_time,
    encode_unix_seconds,
    is_vgpu_time_done,
    scheduler_allocation,
    vgpu_time_sort_key,
)
from vgpu.protocol.pod_devices import (
    ContainerDevice,
    ContainerDevices,
    MigSlot,
    PodDevices,
    VolcanoPodDevice,
    all_consumed,
    consume_segment,
    decode_container_devices,
    decode_pod_devices,
    decode_pod_devices_as_volcano,
    encode_container_devices,
    encode_pod_devices,
    parse_mig_id_as_volcano,
    segment_gpu_uuids,
    split_segments,
)
from vgpu.protocol.register import (
    RegisterRecord,
    VolcanoGpu,
    VolcanoRegister,
    decode_register,
    decode_register_as_volcano,
    encode_register,
    register_devmem,
    register_records,
    register_type,
)

__all__ = [
    "HANDSHAKE_TIMEOUT", "NODE_LOCK_TTL", "VGPU_TIME_INFINITY",
    "ContainerDevice", "ContainerDevices", "Handshake", "MigSlot", "PodDevices", "ProtocolError",
    "RegisterRecord", "VolcanoGpu", "VolcanoPodDevice", "VolcanoRegister",
    "all_consumed", "allocation_failed", "allocation_progress", "allocation_success", "annotations_patch",
    "consume_segment", "decode_bind_phase", "decode_container_devices", "decode_handshake",
    "decode_node_lock", "decode_pod_devices", "decode_pod_devices_as_volcano", "decode_register",
    "decode_register_as_volcano", "decode_vgpu_time", "encode_container_devices", "encode_deleted",
    "encode_node_lock", "encode_pod_devices", "encode_register", "encode_reported", "encode_requesting",
    "encode_unix_seconds", "is_vgpu_time_done", "keys", "node_lock_expired", "node_lock_release_patch",
    "parse_mig_id_as_volcano", "register_devmem", "register_records", "register_type",
    "scheduler_allocation", "segment_gpu_uuids", "split_segments", "vgpu_time_sort_key",
    "volcano_handshake_state", "volcano_requesting_stamp",
]
