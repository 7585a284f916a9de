"""Bench scripts a lab engineer copies: each runs on the simulated bench by default, on a
real one with ``--bench FILE.toml``. Run as ``python -m lab_scripts.bench_scripts.<name>``.
"""
