"""Measurement only; only the command line (``engine/__main__.py``) imports this package.

- ``python -m engine bench``: the wall-clock suite on this machine (``suite.py``; one run:
  ``runner.py``; prompts: ``prompts/*.jsonl`` via ``workloads.py``; figures: ``aggregate.py``;
  ``report.py`` renders ``results.json`` with ``plots.py``'s plots, again with ``--render``).
- ``python -m engine.bench.devices``: Draftless, the peers' rules (``peer_drafters.py``) and
  the oracle (``oracle.py``) replayed on every named verify-cost curve; with
  ``--conversations``, real answers written by ``python -m engine.bench.conversations``.
- ``python -m engine.bench.tune``: the same replay (``tune.py``) over the tuning prompts.
- ``python -m engine.bench.passes``: verify passes on this machine's device: c(n), where a
  pass goes, pass-length invariance, the loop against the oracle.
"""
