"""Helpers shared by the test suites and the benchmarks (importable as ``tests.support``)."""
