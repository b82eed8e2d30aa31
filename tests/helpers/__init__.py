"""Test helpers: a fake clock, a stoppable TCP proxy, service fixtures' plumbing,
a SQLite lock holder and subprocess workers."""
