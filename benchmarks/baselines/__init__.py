"""Straightforward implementations the benchmarks measure our hot paths against (not used by the daemons)."""
