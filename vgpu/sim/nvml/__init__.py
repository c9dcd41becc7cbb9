"""Fake NVML: the Python side of the fake ``libnvidia-ml.so.1`` (find the library, write its JSON config)."""
