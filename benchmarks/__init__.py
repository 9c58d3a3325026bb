"""Draftless benchmark suite: speculative drafters against plain decoding and peers.

Run it with ``python -m engine bench`` (or ``python benchmarks/run.py``); see
``benchmarks/suite.py`` for what is measured and how.
"""
