"""HAMi-core container contract (env + mounts) and the shared-region reader API."""
