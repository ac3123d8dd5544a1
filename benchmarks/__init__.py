"""Benchmarks: each module exposes `run() -> dict` and prints its own figures. Never asserts a time."""
