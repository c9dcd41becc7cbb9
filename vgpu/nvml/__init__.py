"""NVML access: the one place that talks to ``libnvidia-ml.so.1``.

Two bindings, one face: nvidia-ml-py (``pynvml``) for the rare calls and the cffi native
layer (``native/nvml_*.c``) for the hot and the MIG paths.  Callers outside this package see
only the types and functions below and ``NvmlError``; no ``pynvml`` type leaves it.

- ``library``   which library the process loads; ``init_nvml`` (nvidia-ml-py, ``NvmlError``)
- ``errors``    ``NvmlError`` and the ``nvmlReturn_t`` codes
- ``device``    ``GpuInfo``, what discovery says about one GPU
- ``discovery`` ``discover_gpus`` (nvidia-ml-py)
- ``health``    XID / ECC events and per-GPU health (nvidia-ml-py)
- ``context``   ``NvmlContext``, one native context (native/nvml_context.c)
- ``sampler``   ``Sampler``, the per-tick bulk sample (native/nvml_sampler.c)
- ``mig_calls`` ``MigNvml``, the MIG calls (native/nvml_mig.c)
"""
