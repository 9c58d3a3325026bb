"""What the engine learns across chats, held by its owner (the service; a benchmark run).

- ``adaptive``: verify-cost curves per model and acceptance trackers per (model, drafter,
  constrained answers or not);
- ``stores``: drafter memory kept in files (the cross-chat n-gram cache) of the machine's
  own user; each other client (``stores_for``) gets memory of its own, kept in memory
  only, so what one client wrote is never drafted into another's answer.
- ``tables``: model-derived tables (the N-Grammys bigram), and the builds still owed.

Sessions are handed one; no module keeps any of it, so two services in one process
learn apart.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from ..drafters.stores import DrafterStores
from ..policy.calibrated_policy import PolicyMemory
from .clients import fair_victim
from .model_ngrams import ModelTables

# clients whose n-gram memory is kept at once (the least recently served of the party
# keeping the most is forgotten, clients.py): each holds at most the n-gram cache's own
# bounded budget
MAX_CLIENT_STORES = 8


@dataclass
class EngineMemory:
    adaptive: PolicyMemory = field(default_factory=PolicyMemory)
    stores: DrafterStores = field(default_factory=DrafterStores)
    client_stores: OrderedDict[str, DrafterStores] = field(default_factory=OrderedDict)
    tables: ModelTables = field(default_factory=ModelTables)

    def stores_for(self, client: str | None) -> DrafterStores:
        """The drafter memory of ``client`` (None: the machine's own user, kept in files)."""
        if client is None:
            return self.stores
        stores = self.client_stores.pop(client, None) or DrafterStores(persistent=False)
        self.client_stores[client] = stores
        while len(self.client_stores) > MAX_CLIENT_STORES:  # within a party first
            del self.client_stores[fair_victim(self.client_stores, lambda name: name)]
        return stores

    def flush(self) -> None:
        """Save what is kept in files."""
        self.stores.flush()
        self.adaptive.save_acceptance()
