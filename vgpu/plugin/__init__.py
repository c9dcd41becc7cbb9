"""The kubelet device plugin: three vGPU resources served over the device-plugin API v1beta1.

Layout (NVIDIA k8s-device-plugin style: managers compute, servers are thin):

- ``api/``          the .proto, its generated code (``make proto``) and the constants of docs/kubelet-api.md §3
- ``devices``       the resources, their fixed socket names and fake device IDs
- ``listwatch``     wire encoding and exact size of ListAndWatch messages (cached per GPU)
- ``sizecheck``     the startup 4 MiB check naming the smallest ``gpuMemoryFactor``
- ``resources``     ``ResourceManager``: one per resource; device list, health, payload, version
- ``responses``     the ``Allocator`` seam for Allocate / GetPreferredAllocation, the empty and
                    unavailable allocators, and the one protobuf conversion of a container's answer
- ``preference``    GetPreferredAllocation's choice of device IDs (steered to the candidate's GPUs)
- ``allocator``     ``VolcanoAllocator``: Allocate as a sequence over the parts below (docs/protocol.md §5)
- ``matching``      pure candidate search, disambiguation and segment choice over the pod model
- ``pod_writes``    what an Allocate writes back: progress, success, failure, Events, node lock
- ``mig_seam``      the MIG applier the allocator calls, and MIG failures as ``AllocationError``
- ``shortage``      the kubelet-side shortage diagnostic of GetPreferredAllocation (``VGPUKubeletShortage``)
- ``volcano``       ``VolcanoSide``: API client, pod cache, node registration and the allocator
- ``server``        ``DevicePluginServer``: gRPC on a unix socket over a manager + allocator
- ``registration``  ``PluginSet``: serve, register, re-register on kubelet restarts, backoff
- ``metrics``       the plugin's metric families, the counters Allocate and API writes bump, and
                    the scrape-time collector behind ``/metrics`` (docs/metrics.md §10)
- ``health_metrics``  per-GPU XID counts, health and last-change times (docs/metrics.md §10.3)
- ``daemon``        ``PluginDaemon``: startup order, health loop, SIGHUP reload, SIGTERM, the
                    ``/healthz`` ``/livez`` ``/metrics`` endpoint

Health lives in ``vgpu.nvml.health`` (XID policy, health board, NVML event loop); the daemon
subscribes every manager to the board, so one XID flips all three resources at once.
"""
