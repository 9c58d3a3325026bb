"""Planning, pure Python (no MLX): how much of a proposal each pass sends and when
passes go. The policy interface (``draft_policy``), the pass step (``passes``) and
schedule (``schedule``) that the decode loop, the replay and the benchmark share, the
adaptive and calibrated policies, their acceptance memory on disk, and the verify-cost
curve they plan on (``verify_cost``)."""
