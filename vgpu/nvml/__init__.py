"""NVML access: discovery (nvidia-ml-py), sampling and MIG calls (cffi native layer), health events."""
