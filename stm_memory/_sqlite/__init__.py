"""Raw sqlite3 plumbing both storage seams share: per-thread connections and compiled
statements run without SQLAlchemy's per-call overhead."""
