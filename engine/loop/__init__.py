"""The model calls: the draft -> verify -> accept -> rollback loop, greedy and sampled
(``decode``), several draft rows verified as one tree (``tree``), seeded sampling, and
a prompt scored without an answer (``scoring``)."""
