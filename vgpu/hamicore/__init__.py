"""HAMi-core container contract (env + mounts), shared-region reader API and writer."""
