"""Measurement only: the benchmark suite, its report and plots, the tuning, profiling,
cost-curve and drafter-overhead tools. Only the command line (``engine/__main__.py``)
imports this package; nothing in the engine core does.

- ``python -m engine bench``: the suite (``suite.py``: chats in interleaved rounds, the
  oracle, mlx-lm; one engine run: ``runner.py``; the Hugging Face and llama.cpp peers:
  ``peers.py``, ``llamacpp.py``; the draft-count sweep: ``sweep.py``; prompts:
  ``prompts/*.jsonl`` read by ``workloads.py``) → ``results.json`` (figures:
  ``aggregate.py``) → report and plots (``report.py``); ``--render results.json``
  re-renders a committed run without measuring.
- ``python -m engine.bench.llamacpp build``: builds llama.cpp's ``llama-server`` (the
  llama.cpp peer) into the user cache.
- ``python -m engine.bench.tune``: replays plain answers of the tuning prompts through
  drafters and the adaptive policy with a measured c(n): load-free predicted speed-ups.
- ``python -m engine.bench.profile_pass``: where one verify pass's time goes.
- ``python -m engine.bench.costs``: the verify-cost curve c(n), adaptive vs fixed comparisons.
- ``python -m engine.bench.overhead``: propose + observe time per pass at a long history.
- ``python -m engine.bench.json_speed``: plain against speculative under a JSON schema.
- ``python -m engine.bench.first_answer``: the first answer on a new machine (background
  calibration running): the wait, and what the answer's statistics say.
"""
