"""Shoal's benchmark: a real broker process driven by confluent-kafka clients.

`make bench` (or `.venv/bin/python -m bench`) starts `shoal serve` on a free port with a
temporary data directory, runs the registered phases (see `bench.phases.PHASES`), prints one
table and a few ratios, and removes the data directory. This is a benchmark, not a test: it
asserts nothing about the figures.
"""
