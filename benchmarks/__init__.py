"""Benchmarks for stm-memory: ``python -m benchmarks.run`` (``make bench``).

Benchmarks are not tests. Each case measures our path and its *floor* (the same work
written naively by hand, or a peer library) in the same run and reports their ratio,
because absolute times vary between machines. See ``benchmarks/README.md``.
"""
