"""What the engine learns across chats, held by its owner (the service; a benchmark run).

- ``adaptive``: verify-cost curves per model and acceptance trackers per (model, drafter,
  constrained answers or not);
- ``stores``: drafter memory kept in files (the cross-chat n-gram cache);
- ``tables``: model-derived tables (the N-Grammys bigram), and the builds still owed.

Sessions are handed one; no module keeps any of it, so two services in one process
learn apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .adaptive import AdaptiveMemory
from .drafters.stores import DrafterStores
from .model_ngrams import ModelTables


@dataclass
class EngineMemory:
    adaptive: AdaptiveMemory = field(default_factory=AdaptiveMemory)
    stores: DrafterStores = field(default_factory=DrafterStores)
    tables: ModelTables = field(default_factory=ModelTables)

    def flush(self) -> None:
        """Save what is kept in files."""
        self.stores.flush()
