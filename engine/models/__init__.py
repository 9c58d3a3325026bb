"""Where weights come from: the embedded default, a local mlx-lm folder, or a hub id."""

from __future__ import annotations

import importlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import EngineError, describe_error
from ..formats.tool_calls import tool_format
from ..untrusted import read_regular_file
from .embedded import EMBEDDED_NAME, ensure_embedded_model
from .gguf_convert import ProgressCallback
from .weights import check_sizes

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
MAX_CONFIG_BYTES = 4 << 20
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")


@dataclass
class LoadedModel:
    name: str
    path: Path
    model: Any  # mlx.nn.Module
    tokenizer: Any  # mlx_lm TokenizerWrapper
    config: dict
    speculation: str  # "on (tree)", "on (one row: why)" or "off (why)"
    details: str = ""  # architecture, size, quantization: "llama · 135M params · float32"
    facts: dict = field(default_factory=dict)  # the same as data (``model_facts``)

    @property
    def speculates(self) -> bool:
        return self.speculation.startswith("on")

    @property
    def context_length(self) -> int:
        return int(self.config.get("max_position_embeddings") or 1 << 30)


def check_model_folder(path: Path) -> dict:
    """Raise EngineError unless ``path`` looks like a loadable mlx-lm model folder."""
    if not path.is_dir():
        raise EngineError(
            f"No model folder at {path}. Pick a folder that holds config.json, "
            "*.safetensors and the tokenizer files."
        )
    config_file = path / "config.json"
    if not config_file.exists():
        raise EngineError(f"{path} is not a model folder: config.json is missing.")
    try:
        config = json.loads(read_regular_file(config_file, MAX_CONFIG_BYTES))
    except (OSError, ValueError, RecursionError) as error:  # UnicodeError is a ValueError
        raise EngineError(f"{config_file} is not valid JSON ({error}).") from None
    if not isinstance(config, dict):
        raise EngineError(f"{config_file} is not a JSON object of settings.")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or not re.fullmatch(r"[\w.-]+", model_type):
        raise EngineError(
            f"{config_file} names no model_type; is this a Hugging Face model folder?"
        )
    try:
        importlib.import_module(f"mlx_lm.models.{_remap(model_type)}")
    except ImportError:
        import mlx_lm

        raise EngineError(
            f"Architecture {model_type!r} is not supported by mlx-lm "
            f"{mlx_lm.__version__}. Try a newer mlx-lm or another model."
        ) from None
    if not any(path.glob("*.safetensors")):
        raise EngineError(f"{path} holds no *.safetensors weights.")
    if not any((path / name).exists() for name in TOKENIZER_FILES):
        raise EngineError(
            f"{path} has no tokenizer (tokenizer.json or tokenizer.model is missing)."
        )
    check_sizes(config, path)
    return config


def _remap(model_type: str) -> str:
    from mlx_lm.utils import MODEL_REMAPPING

    return MODEL_REMAPPING.get(model_type, model_type).replace("-", "_")


def download_from_hub(
    repo_id: str, progress: ProgressCallback | None = None, cancel: Callable[[], bool] | None = None
) -> Path:
    """Download an mlx-lm model from the Hugging Face Hub into the downloads folder,
    resuming what an earlier (cancelled or broken) download left; or explain why it cannot."""
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", "10")
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", "20")
    from mlx_lm.utils import DEFAULT_ALLOW_PATTERNS

    from ..paths import downloads_dir
    from .hub_download import download_model

    if progress:
        progress(0, 0, f"Downloading {repo_id} from Hugging Face…")  # total 0: size not known yet
    return download_model(
        repo_id,
        downloads_dir() / repo_id.replace("/", "--"),
        progress,
        cancel,
        endpoint=os.environ.get("HF_ENDPOINT"),  # read now, not at import
        allow_patterns=DEFAULT_ALLOW_PATTERNS,
    )


def resolve_model_path(
    spec: str | None,
    progress: ProgressCallback | None = None,
    cancel: Callable[[], bool] | None = None,
) -> tuple[str, Path]:
    if not spec:
        return EMBEDDED_NAME, ensure_embedded_model(progress)
    path = Path(spec).expanduser()
    if path.exists() or not HUB_ID.match(spec):
        return path.name, path
    return spec, download_from_hub(spec, progress, cancel)


def check_weights(model, name: str, path: Path) -> None:
    """One short forward pass: weights with NaN or infinity (a damaged file with valid
    headers) give non-finite logits, which would otherwise decode as end-of-text forever."""
    from ..tokens import logits_are_finite

    try:
        finite = logits_are_finite(model)
    except Exception as error:  # shapes that do not fit together, missing tensors
        raise EngineError(f"Could not run the model in {path}: {describe_error(error)}") from None
    if not finite:
        raise EngineError(
            f"The model's weights are broken: {name} computes NaN or infinity "
            f"(the files in {path} are probably damaged, e.g. by an interrupted "
            "download). Download or convert the model again."
        )


def load_model(
    spec: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: Callable[[], bool] | None = None,
) -> LoadedModel:
    """Load a model by spec: None (embedded default), a folder, or a hub id (whose download
    stops, resumable, once ``cancel()`` says so)."""
    from mlx_lm import load

    from .caches import speculation_cache, speculation_for

    name, path = resolve_model_path(spec, progress, cancel)
    config = check_model_folder(path)
    if progress:
        progress(0, 1, f"Loading {name}…")
    try:
        model, tokenizer = load(str(path))
    except EngineError:
        raise
    except Exception as error:  # corrupt weights, shape mismatches, tokenizer errors
        raise EngineError(f"Could not load the model in {path}: {describe_error(error)}") from None
    check_weights(model, name, path)
    speculation = speculation_for(model, speculation_cache(model)).line
    if progress:
        progress(1, 1, f"Loaded {name}")
    facts = model_facts(model, config, tokenizer)
    return LoadedModel(name, path, model, tokenizer, config, speculation, describe(facts), facts)


def describe(facts: dict) -> str:
    """Architecture, parameter count and weight format, as the app shows them."""
    return f"{facts['architecture']} · {size_text(facts['parameters'])} params · {facts['weights']}"


def model_facts(model, config: dict, tokenizer) -> dict:
    """What a client asks about a model: ``architecture``, ``parameters`` (a count),
    ``bytes`` (the weights' size in memory), ``weights`` (format or quantization),
    ``context_length``, ``tool_format`` (how it calls tools: ``tool_calls.tool_format``)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    count, dtypes, size = 0, set(), 0
    for name, array in tree_flatten(model.parameters()):
        size += array.nbytes
        if name.endswith((".scales", ".biases")) and array.dtype != mx.uint32:
            continue  # quantization metadata, not parameters
        # packed quantized weights hold 32 // bits values per uint32
        bits = (config.get("quantization") or {}).get("bits") if array.dtype == mx.uint32 else None
        count += array.size * (32 // bits if bits else 1)
        if array.dtype != mx.uint32:
            dtypes.add(str(array.dtype).removeprefix("mlx.core."))
    quantization = config.get("quantization")
    if isinstance(quantization, dict) and quantization.get("bits"):
        weights = f"{quantization['bits']}-bit (group {quantization.get('group_size', 64)})"
    else:
        weights = "/".join(sorted(dtypes)) or "unknown"
    return {
        "architecture": str(config.get("model_type", "unknown")),
        "parameters": count,
        "bytes": size,  # the weights in memory
        "weights": weights,
        "context_length": int(config.get("max_position_embeddings") or 0) or None,
        "tool_format": tool_format(tokenizer),
    }


def size_text(count: int) -> str:
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.3g}{unit}"
    return str(count)
