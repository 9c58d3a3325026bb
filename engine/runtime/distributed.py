"""Speculation across machines: one rank decides, every rank runs the same model calls.

Under ``mlx.launch … python -m engine serve --shard tensor`` every rank loads the model and
keeps its shard of it (mlx-lm's ``model.shard()``; ``--shard pipeline`` uses
``model.model.pipeline()`` where the architecture has it). Rank 0 serves HTTP and runs the
draft → verify → accept loop. Before each call into the sharded model (prefill, verify,
tree verify, cache trim/rollback, a stateless batch) it broadcasts that call — which op,
which tokens, the draft tree's rows — and the other ranks run the same call on their
shard, so all ranks do every pass in lockstep and their KV caches stay identical.

Why rank 0 alone drafts: the adaptive draft length reads the clock, and n-gram memory is
read from each machine's disk, so two ranks drafting on their own could disagree about a
draft's length and the sharded forward passes would no longer match. Broadcasting the
decision costs one small all-reduce per pass next to the model's own per-layer ones.
"""

from __future__ import annotations

import signal
import sys
import weakref

import mlx.core as mx

from ..errors import EngineError
from ..events import ModelEvent, ProgressEvent
from ..loop.decode import DraftTree, Target
from ..tokens import output_size
from .service import EngineService

HEADER = 64  # int32 slots per message; longer token lists follow in a second all-reduce
INLINE = HEADER - 4
(
    STOP,
    CALL,
    PREFILL,
    FORWARD,
    TREE,
    KEEP_PATH,
    TRIM,
    TRUNCATE,
    RESET,
    DROP,
    CHECKPOINT,
    RESTORE,
) = range(1, 13)


class Mirror:
    """Rank 0 sends (op, target, ints); the other ranks receive the same via all_sum."""

    def __init__(self, group):
        self.group = group
        self.rank = group.rank()
        self.dropped: list[int] = []  # ids of rank-0 caches that were garbage-collected

    def _all_sum(self, values: list[int] | None, size: int) -> list[int]:
        data = mx.array(values if self.rank == 0 else [0] * size, dtype=mx.int32)
        return mx.distributed.all_sum(data, group=self.group, stream=mx.cpu).tolist()

    def send(self, op: int, target: int = 0, ints=()) -> None:
        while self.dropped and op != DROP:
            self.send(DROP, self.dropped.pop())
        ints = [int(i) for i in ints]
        inline = ints if len(ints) <= INLINE else []
        self._all_sum(
            [op, target, len(ints), int(bool(inline) or not ints)]
            + inline
            + [0] * (INLINE - len(inline)),
            HEADER,
        )
        if ints and not inline:
            self._all_sum(ints, len(ints))

    def receive(self) -> tuple[int, int, list[int]]:
        header = self._all_sum(None, HEADER)
        op, target, count, was_inline = header[:4]
        ints = header[4 : 4 + count] if was_inline else self._all_sum(None, count)
        return op, target, ints


def _pack_rows(root: int, rows) -> list[int]:
    return [root, len(rows), *[len(r) for r in rows], *[t for r in rows for t in r]]


def _unpack_rows(ints: list[int]) -> tuple[int, list[list[int]]]:
    root, count = ints[0], ints[1]
    lengths, flat = ints[2 : 2 + count], ints[2 + count :]
    rows, start = [], 0
    for length in lengths:
        rows.append(flat[start : start + length])
        start += length
    return root, rows


class MirroredTarget(Target):
    """Rank 0's Target: announces each call so the other ranks make it on their shard.

    Every model call is evaluated before the next announcement, so the collectives inside
    the model run in the same order on every rank.
    """

    _next_id = 1
    pipelines = False  # every input token is announced, so it must be known first

    def __init__(self, model, mirror: Mirror):
        super().__init__(model)
        self.mirror = mirror
        self.id = MirroredTarget._next_id
        MirroredTarget._next_id += 1
        self._inside = False
        weakref.finalize(self, mirror.dropped.append, self.id)

    def _announce(self, op: int, ints=()) -> bool:
        """Send the op unless it is part of one already sent; True if this call sent it."""
        if self._inside:
            return False
        self.mirror.send(op, self.id, ints)
        self._inside = True
        return True

    def _call(self, op, ints, method, *args):
        sent = self._announce(op, ints)
        try:
            result = method(*args)
            if isinstance(result, mx.array):
                mx.eval(result)
            return result
        finally:
            if sent:
                self._inside = False

    def prefill(self, tokens):
        return self._call(PREFILL, tokens, super().prefill, tokens)

    def forward(self, tokens):
        return self._call(FORWARD, tokens, super().forward, tokens)

    def forward_tree(self, tree: DraftTree):
        rows = [[tree.tokens[n] for n in nodes] for nodes in tree.row_nodes]
        return self._call(TREE, _pack_rows(tree.tokens[0], rows), super().forward_tree, tree)

    def keep_path(self, base, path):
        return self._call(KEEP_PATH, [base, *path], super().keep_path, base, path)

    def checkpoint(self):
        if self.trimmable:  # the mark is a length, the same on every rank
            return super().checkpoint()
        return self._call(CHECKPOINT, [], super().checkpoint)  # each rank keeps its own state

    def restore(self, mark):
        if self.trimmable:  # back to the mark's length by a trim, which is mirrored
            self.trim(self.fed - mark[0])
            return
        self._call(RESTORE, [], super().restore, mark)

    def trim(self, count):
        if count > 0:
            return self._call(TRIM, [count], super().trim, count)

    def truncate(self, length):
        return self._call(TRUNCATE, [length], super().truncate, length)

    def reset(self):
        return self._call(RESET, [], super().reset)


class MirroredModel:
    """Rank 0's model as sessions see it: cache-less calls (the model's bigram table) are
    announced; calls with a cache come from a MirroredTarget, which announced them."""

    def __init__(self, model, mirror: Mirror, output_size: int):
        self._model = model
        self._mirror = mirror
        self.draftless_output_size = output_size  # the vocabulary, read before the split

    def __call__(self, inputs, cache=None, **kwargs):
        if cache is not None:
            return self._model(inputs, cache=cache, **kwargs)
        batch, length = inputs.shape
        self._mirror.send(CALL, 0, [batch, length, *inputs.reshape(-1).tolist()])
        out = self._model(inputs, **kwargs)
        mx.eval(out)
        return out

    def __getattr__(self, name):
        return getattr(self._model, name)


def shard(loaded, mode: str, group) -> None:
    model = loaded.model
    if mode == "tensor":
        if not hasattr(model, "shard"):
            raise EngineError(
                f"{loaded.name} cannot be split by tensor (mlx-lm has no shard() "
                "for its architecture); try --shard pipeline."
            )
        model.shard(group)
    else:
        if not hasattr(getattr(model, "model", None), "pipeline"):
            raise EngineError(
                f"{loaded.name} cannot be split into a pipeline (mlx-lm supports "
                "that for a few architectures only); try --shard tensor."
            )
        model.model.pipeline(group)
    mx.eval(model.parameters())


def load_sharded(spec, mode: str, group, progress=None):
    from ..models import load_model

    loaded = load_model(spec, progress)
    vocabulary = output_size(loaded.model)  # before the split can cut the output layer
    shard(loaded, mode, group)
    return loaded, vocabulary


class DistributedService(EngineService):
    """Rank 0's engine service: the sharded model, with every model call mirrored."""

    embeds = False  # (an embedding's calls are not mirrored: the other ranks would wait)

    def __init__(self, mirror: Mirror, mode: str):
        super().__init__()
        self.mirror = mirror
        self.mode = mode

    def _ensure_model(self, spec, push, should_stop=None) -> None:  # a local load: no download
        if self._loaded is None:

            def progress(done, total, message):
                push(ProgressEvent("load", done, total, message))

            loaded, vocabulary = load_sharded(spec, self.mode, self.mirror.group, progress)
            loaded.model = MirroredModel(loaded.model, self.mirror, vocabulary)
            self._loaded, self._loaded_spec = loaded, spec
        elif spec != self._loaded_spec:
            raise EngineError(f"This distributed server serves {self._loaded.name} only.")
        loaded = self._loaded
        push(
            ModelEvent(
                loaded.name,
                str(loaded.path),
                f"{loaded.speculation}; {self.mode} split over {self.mirror.group.size()} ranks",
                loaded.details,
                loaded.facts,
            )
        )

    def _new_target(self, model) -> Target:
        return MirroredTarget(model, self.mirror)

    def shutdown(self) -> None:
        super().shutdown()  # the engine thread has stopped: no call is in flight
        self.mirror.send(STOP)


def follow(mirror: Mirror, model) -> None:
    """A following rank: make every call rank 0 announces, until it says stop."""
    targets: dict[int, Target] = {}
    marks: dict[int, tuple] = {}  # each target's last checkpoint on this rank
    while True:
        op, target_id, ints = mirror.receive()
        if op == STOP:
            return
        if op == CALL:
            batch, length = ints[:2]
            mx.eval(model(mx.array(ints[2:], dtype=mx.uint32).reshape(batch, length)))
            continue
        if op == DROP:
            targets.pop(target_id, None)
            marks.pop(target_id, None)
            continue
        target = targets.get(target_id)
        if target is None:
            target = targets[target_id] = Target(model)
        if op == PREFILL:
            target.prefill(ints)
        elif op == FORWARD:
            mx.eval(target.forward(ints))
        elif op == TREE:
            mx.eval(target.forward_tree(DraftTree(*_unpack_rows(ints))))
        elif op == KEEP_PATH:
            target.keep_path(ints[0], ints[1:])
        elif op == CHECKPOINT:
            marks[target_id] = target.checkpoint()
        elif op == RESTORE:
            target.restore(marks[target_id])
        elif op == TRIM:
            target.trim(ints[0])
        elif op == TRUNCATE:
            target.truncate(ints[0])
        elif op == RESET:
            target.reset()
        else:
            raise EngineError(f"rank {mirror.rank}: unknown op {op} from rank 0")


def start_rank(mode: str, model_spec):
    """Rank 0: a DistributedService to serve with. Other ranks: follow rank 0, then None."""
    group = mx.distributed.init()
    if group.size() < 2:
        raise EngineError(
            "--shard needs several processes: start the server with "
            "`mlx.launch -n N … python -m engine serve --shard tensor` "
            "(see the README, 'Serving over several Macs')."
        )
    mirror = Mirror(group)
    if mirror.rank == 0:
        return DistributedService(mirror, mode)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches every rank; rank 0 says stop
    loaded, _ = load_sharded(model_spec, mode, group)
    print(
        f"rank {mirror.rank}/{group.size()}: {loaded.name} ready ({mode} split); following rank 0",
        file=sys.stderr,
        flush=True,
    )
    follow(mirror, loaded.model)
    return None
