"""Convert a Llama-architecture GGUF file into an mlx-lm model folder.

Writes config.json, model.safetensors, tokenizer.json and tokenizer_config.json (with
the chat template from the GGUF metadata). Weights are dequantized with the ``gguf``
package; llama.cpp's permutation of the q/k projection rows is undone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import EngineError

ProgressCallback = Callable[[int, int, str], None]

LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
GLOBAL_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
CONTROL_TOKEN_TYPE = 3


def hf_tensor_name(gguf_name: str) -> str:
    if gguf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[gguf_name]
    parts = gguf_name.split(".")
    if parts[0] == "blk" and len(parts) == 4 and parts[2] in LAYER_NAMES:
        return f"model.layers.{parts[1]}.{LAYER_NAMES[parts[2]]}.{parts[3]}"
    raise EngineError(f"Unexpected tensor {gguf_name!r} in the GGUF file.")


def unpermute_rows(weights: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's rotary permutation of q/k projection rows."""
    half = weights.shape[0] // n_head // 2
    return (
        weights.reshape(n_head, half, 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)
    )


def _field(reader, key, default=None):
    field = reader.fields.get(key)
    return field.contents() if field is not None else default


def read_config(reader) -> dict:
    arch = _field(reader, "general.architecture")
    if arch != "llama":
        raise EngineError(
            f"This GGUF holds a {arch!r} model; only Llama-architecture GGUF "
            "files can be converted. Use an mlx-lm model folder instead."
        )
    n_embd = int(_field(reader, "llama.embedding_length"))
    n_head = int(_field(reader, "llama.attention.head_count"))
    tokens = _field(reader, "tokenizer.ggml.tokens")
    has_output = any(t.name == "output.weight" for t in reader.tensors)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": n_embd,
        "intermediate_size": int(_field(reader, "llama.feed_forward_length")),
        "num_hidden_layers": int(_field(reader, "llama.block_count")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(_field(reader, "llama.attention.head_count_kv", n_head)),
        "head_dim": int(_field(reader, "llama.rope.dimension_count", n_embd // n_head)),
        "rms_norm_eps": float(_field(reader, "llama.attention.layer_norm_rms_epsilon", 1e-5)),
        "rope_theta": float(_field(reader, "llama.rope.freq_base", 10000.0)),
        "max_position_embeddings": int(_field(reader, "llama.context_length", 2048)),
        "vocab_size": len(tokens),
        "tie_word_embeddings": not has_output,
        "bos_token_id": int(_field(reader, "tokenizer.ggml.bos_token_id", 1)),
        "eos_token_id": int(_field(reader, "tokenizer.ggml.eos_token_id", 2)),
    }


def write_tokenizer(reader, folder: Path) -> None:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if _field(reader, "tokenizer.ggml.model") != "gpt2":
        raise EngineError("Only byte-level BPE (gpt2-style) GGUF tokenizers can be converted.")
    tokens = list(_field(reader, "tokenizer.ggml.tokens"))
    types = list(_field(reader, "tokenizer.ggml.token_type"))
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    backend = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(
        [
            AddedToken(t, special=True, normalized=False)
            for t, kind in zip(tokens, types)
            if kind == CONTROL_TOKEN_TYPE
        ]
    )

    def token(key):
        index = _field(reader, key)
        return tokens[int(index)] if index is not None else None

    wrapper = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=token("tokenizer.ggml.bos_token_id"),
        eos_token=token("tokenizer.ggml.eos_token_id"),
        unk_token=token("tokenizer.ggml.unknown_token_id"),
        pad_token=token("tokenizer.ggml.padding_token_id"),
        clean_up_tokenization_spaces=False,
    )
    template = _field(reader, "tokenizer.chat_template")
    if template:
        wrapper.chat_template = template
    wrapper.save_pretrained(str(folder))


def convert_gguf(
    gguf_path: Path, folder: Path, dtype: str = "float32", progress: ProgressCallback | None = None
) -> None:
    """Write an mlx-lm model folder for ``gguf_path`` into ``folder`` (which must exist)."""
    import gguf
    import mlx.core as mx

    progress = progress or (lambda done, total, message: None)
    try:
        reader = gguf.GGUFReader(str(gguf_path))
    except Exception as error:  # the gguf package raises many kinds on a bad file
        raise EngineError(f"Could not read the GGUF file {gguf_path}: {error}") from error
    config = read_config(reader)
    total = len(reader.tensors) + 1
    weights = {}
    for done, tensor in enumerate(reader.tensors):
        name = hf_tensor_name(tensor.name)
        array = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        if name.endswith("q_proj.weight"):
            array = unpermute_rows(array, config["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            array = unpermute_rows(array, config["num_key_value_heads"])
        weights[name] = mx.array(array).astype(getattr(mx, dtype))
        progress(done + 1, total, f"Converting weights ({done + 1}/{len(reader.tensors)})")
    mx.save_safetensors(str(folder / "model.safetensors"), weights, metadata={"format": "mlx"})
    config["torch_dtype"] = dtype
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    write_tokenizer(reader, folder)
    progress(total, total, "Tokenizer written")
