"""Kubernetes access: node registration, node-scoped pod cache, patches, events."""
