"""What makes writes land exactly once: the outbox, the persister, writer leases, the
janitor, and batching for bulk work."""
