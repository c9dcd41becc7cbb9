"""Kubelet device-plugin API v1beta1: generated messages/stubs plus the API's constants.

``deviceplugin_pb2`` / ``deviceplugin_pb2_grpc`` are generated from ``deviceplugin.proto``
by ``make proto`` (never edit them by hand).  The constants come from
docs/kubelet-api.md §3.
"""

from __future__ import annotations

from vgpu.plugin.api import deviceplugin_pb2 as pb
from vgpu.plugin.api import deviceplugin_pb2_grpc as pb_grpc

VERSION = "v1beta1"
SUPPORTED_VERSIONS = (VERSION,)
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
DEVICE_PLUGIN_PATH = "/var/lib/kubelet/device-plugins/"
KUBELET_SOCKET = DEVICE_PLUGIN_PATH + "kubelet.sock"
KUBELET_CHECKPOINT = "kubelet_internal_checkpoint"
PRE_START_CONTAINER_TIMEOUT_S = 30
# The kubelet reads ListAndWatch with gRPC's default receive limit.
KUBELET_MAX_RECEIVE_BYTES = 4 * 1024 * 1024
MAX_DEVICE_ID_LENGTH = 63

# Full service names as they appear on the wire (/v1beta1.DevicePlugin/<Method>).
DEVICE_PLUGIN_SERVICE = pb.DESCRIPTOR.services_by_name["DevicePlugin"].full_name
REGISTRATION_SERVICE = pb.DESCRIPTOR.services_by_name["Registration"].full_name

__all__ = [
    "pb",
    "pb_grpc",
    "VERSION",
    "SUPPORTED_VERSIONS",
    "HEALTHY",
    "UNHEALTHY",
    "DEVICE_PLUGIN_PATH",
    "KUBELET_SOCKET",
    "KUBELET_CHECKPOINT",
    "PRE_START_CONTAINER_TIMEOUT_S",
    "KUBELET_MAX_RECEIVE_BYTES",
    "MAX_DEVICE_ID_LENGTH",
    "DEVICE_PLUGIN_SERVICE",
    "REGISTRATION_SERVICE",
]
