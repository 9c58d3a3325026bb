"""Measurement only: the benchmark suite, its report and plots, the cost-curve and
drafter-overhead tools. Only the command line (``engine/__main__.py``) imports this package;
nothing in the engine core does.

- ``python -m engine bench``: the suite (``suite.py``) → ``results.json`` → report and plots
  (``report.py``); ``--render results.json`` re-renders a committed run without measuring.
- ``python -m engine.bench.costs``: the verify-cost curve c(n), adaptive vs fixed comparisons.
- ``python -m engine.bench.overhead``: propose + observe time per pass at a long history.
"""
