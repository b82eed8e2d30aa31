"""The engine's working state: live entries read through the cache (hydrated from rows,
indexed per owner), deletion and repair over them, and the memoised server and user
settings."""
