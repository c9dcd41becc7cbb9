"""vgpu: a wire-compatible Python successor of the Volcano vGPU device plugin."""

__version__ = "0.1.0"
