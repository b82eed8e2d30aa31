"""The engine's working state: live entries read through the cache (hydrated from rows,
indexed per owner) and the memoised server and user settings."""
