"""Prometheus collectors, container discovery, feedback loop."""
