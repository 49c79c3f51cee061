"""Benchmarks: ``python -m bench`` (see README's Performance section)."""
