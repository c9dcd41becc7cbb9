"""Helpers only the test suites use (the ones benchmarks share live with the stand-ins in vgpu.sim)."""
