"""Hub search results as a person chooses among them, without Qt: MLX repos grouped by the
model they convert, each group's quantizations (one repo each: 4-bit, 8-bit, bf16 …) in
order of size, and a repo's download size from its file sizes."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatch

# the files a download fetches (mlx_lm's DEFAULT_ALLOW_PATTERNS, which the app cannot import
# without loading MLX); weights dominate, so a small difference here moves no size shown
DOWNLOADED = (
    "*.json",
    "model*.safetensors",
    "*.py",
    "tokenizer.model",
    "*.tiktoken",
    "tiktoken.model",
    "*.txt",
    "*.jsonl",
    "*.jinja",
)
BITS = re.compile(r"(\d+(?:\.\d+)?)[-_]?bits?", re.IGNORECASE)
FLOATS = {"bf16": 16, "fp16": 16, "f16": 16, "fp32": 32, "f32": 32, "mxfp4": 4, "nvfp4": 4}
MODIFIERS = {"dwq", "awq", "gptq", "mixed", "mlx", "q"}  # parts of a quantization's name
PARAMETERS = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([BM])(?![a-zA-Z])", re.IGNORECASE)
NOT_STATED = "not stated"


@dataclass(frozen=True)
class Quantization:
    repo: str
    label: str  # "4-bit", "8-bit DWQ", "bf16", or NOT_STATED
    bits: float | None  # for the order; None when the name does not say
    downloads: int = 0
    likes: int = 0


@dataclass(frozen=True)
class HubModel:
    name: str  # the base model's id where the hub names it, else the repo name unquantized
    parameters: str  # "1.5B", from the name; "" when it does not say
    quantizations: tuple[Quantization, ...]

    @property
    def downloads(self) -> int:
        return sum(q.downloads for q in self.quantizations)

    @property
    def likes(self) -> int:
        return sum(q.likes for q in self.quantizations)


def _marker(part: str) -> tuple[str, float | None] | None:
    """A name part that says how weights are stored: its label and bits; None otherwise."""
    lowered = part.lower()
    if match := BITS.fullmatch(lowered):
        bits = float(match.group(1))
        return f"{match.group(1)}-bit", bits
    if lowered in FLOATS:
        return lowered, float(FLOATS[lowered])
    if lowered in MODIFIERS or re.fullmatch(r"q\d+", lowered):
        return (lowered if lowered == "mixed" else part.upper()), None
    return None


def split_quantization(name: str) -> tuple[str, str, float | None]:
    """'Qwen2.5-1.5B-Instruct-4bit-DWQ' → ('Qwen2.5-1.5B-Instruct', '4-bit DWQ', 4.0): the
    name without its trailing quantization parts, their label, the bits they say."""
    parts = name.split("-")
    if len(parts) > 2 and parts[-1].lower() in ("bit", "bits") and parts[-2].isdigit():
        parts[-2:] = [f"{parts[-2]}bit"]  # "-8-bit"
    labels: list[str] = []
    bits = None
    while len(parts) > 1 and (found := _marker(parts[-1])) is not None:
        label, said = found
        if label.lower() != "mlx":
            labels.insert(0, label)
        bits = said if said is not None else bits
        parts.pop()
    return "-".join(parts), " ".join(labels) or NOT_STATED, bits


def base_model(tags: list[str] | None) -> str | None:
    """The model a repo was made from, as its hub tags say ('base_model:quantized:X' before a
    plain 'base_model:X'); None when they do not."""
    plain = None
    for tag in tags or ():
        if tag.startswith("base_model:quantized:"):
            return tag.split(":", 2)[2]
        if tag.startswith("base_model:") and tag.count(":") == 1:
            plain = tag.split(":", 1)[1]
    return plain


def parameters_text(name: str) -> str:
    """'1.5B' or '360M' where the name says how many parameters; '' otherwise."""
    match = PARAMETERS.search(name)
    return f"{match.group(1)}{match.group(2).upper()}" if match else ""


def group_models(infos) -> list[HubModel]:
    """Repos (``ModelInfo``-like: id, downloads, likes, tags) grouped by the model they
    convert, groups in order of first appearance (the hub's order: most downloaded first),
    quantizations by bits (unstated last)."""
    groups: dict[str, tuple[str, list[Quantization]]] = {}
    for info in infos:
        repo = str(info.id)
        own = repo.rsplit("/", 1)[-1]
        stem, label, bits = split_quantization(own)
        base = base_model(getattr(info, "tags", None))
        base_stem = split_quantization(base.rsplit("/", 1)[-1])[0] if base else stem
        key = base_stem.lower()
        name, members = groups.setdefault(key, (base or stem, []))
        members.append(
            Quantization(repo, label, bits, int(info.downloads or 0), int(info.likes or 0))
        )
    return [
        HubModel(name, parameters_text(name), tuple(sorted(members, key=_order)))
        for name, members in groups.values()
    ]


def _order(quantization: Quantization) -> tuple[float, str]:
    bits = quantization.bits if quantization.bits is not None else float("inf")
    return bits, quantization.label


def download_size(siblings) -> int | None:
    """Bytes of the files a download fetches, from a repo's file list with sizes
    (``model_info(files_metadata=True).siblings``); None when a weight's size is unknown or
    the repo holds no weights."""
    total, weights = 0, 0
    for sibling in siblings or ():
        name = str(sibling.rfilename)
        if not any(fnmatch(name, pattern) for pattern in DOWNLOADED):
            continue
        size = getattr(sibling, "size", None)
        if name.endswith(".safetensors"):
            if not isinstance(size, int) or size < 0:
                return None
            weights += 1
        total += size if isinstance(size, int) and size > 0 else 0
    return total if weights else None


def count_text(count: int) -> str:
    """'950', '12.3k', '4.1M': a count of downloads or likes, short."""
    if count < 1000:
        return str(count)
    if count < 1_000_000:
        return f"{count / 1000:.1f}k"
    return f"{count / 1_000_000:.1f}M"
