"""What makes writes land exactly once: the outbox, the persister, writer leases,
repair of the cache from rows, the janitor, and batching for bulk work."""
