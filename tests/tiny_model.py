"""Tiny random-weight models built inside the tests (no downloads, a few KB each).

``write_tiny_llama(folder)`` writes a complete mlx-lm model folder: a 2-layer float32
Llama with random weights and a byte-level tokenizer (every byte is one token, so a
multi-byte character spans several tokens) with a ChatML chat template.
"""

from __future__ import annotations

import json
from pathlib import Path

CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_level_vocab() -> list[str]:
    from tokenizers.pre_tokenizers import ByteLevel

    return SPECIALS + sorted(ByteLevel.alphabet())


def write_byte_tokenizer(folder: Path) -> int:
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = byte_level_vocab()
    backend = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(vocab)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    wrapper = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )
    wrapper.chat_template = CHATML
    wrapper.save_pretrained(str(folder))
    return len(vocab)


def tiny_llama_config(vocab_size: int, layers: int = 2, hidden: int = 64) -> dict:
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "intermediate_size": hidden * 2,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": vocab_size,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
    }


def make_tiny_llama(vocab_size: int = 259, seed: int = 0, layers: int = 2, hidden: int = 64):
    """An in-memory random-weight float32 Llama (model only)."""
    import mlx.core as mx
    from mlx_lm.models import llama

    mx.random.seed(seed)
    model = llama.Model(llama.ModelArgs.from_dict(tiny_llama_config(vocab_size, layers, hidden)))
    mx.eval(model.parameters())
    return model


def write_tiny_llama(folder: Path, seed: int = 0, layers: int = 2, hidden: int = 64) -> Path:
    import mlx.core as mx
    from mlx.utils import tree_flatten

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_size = write_byte_tokenizer(folder)
    model = make_tiny_llama(vocab_size, seed, layers, hidden)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(tiny_llama_config(vocab_size, layers, hidden)))
    return folder


# ----------------------------------------------------------- the architecture matrix
# Tiny configs of the architectures people load from mlx-community (hidden 64, 2-4 layers).
# Windows are short (8 tokens) so that a test's prompt and answer run well past them.
WINDOW = 8
_COMMON = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "tie_word_embeddings": True,
    "eos_token_id": 2,
}
ARCHITECTURES = {
    "llama": {"model_type": "llama", "num_hidden_layers": 2},
    "qwen2": {"model_type": "qwen2", "num_hidden_layers": 2},
    "qwen3": {"model_type": "qwen3", "num_hidden_layers": 2, "head_dim": 16},
    "qwen3_moe": {
        "model_type": "qwen3_moe",
        "num_hidden_layers": 2,
        "head_dim": 16,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "moe_intermediate_size": 32,
        "norm_topk_prob": True,
    },
    "gemma2": {
        "model_type": "gemma2",
        "num_hidden_layers": 2,
        "head_dim": 16,
        "query_pre_attn_scalar": 16,
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
    },
    "gemma3_text": {
        "model_type": "gemma3_text",
        "num_hidden_layers": 4,
        "head_dim": 16,
        "query_pre_attn_scalar": 16,
        "sliding_window": WINDOW,
        "sliding_window_pattern": 2,
    },
    "phi3": {"model_type": "phi3", "num_hidden_layers": 2, "tie_word_embeddings": False},
    "olmo2": {"model_type": "olmo2", "num_hidden_layers": 2},
    "mistral-swa": {
        "model_type": "mistral",
        "num_hidden_layers": 2,
        "sliding_window": WINDOW,
        "layer_types": ["sliding_attention", "full_attention"],
    },
    # hybrid and recurrent
    "mamba": {
        "model_type": "mamba",
        "num_hidden_layers": 2,
        "hidden_size": 32,
        "intermediate_size": 64,
        "state_size": 8,
        "conv_kernel": 4,
        "use_bias": False,
        "use_conv_bias": True,
        "time_step_rank": 4,
    },
    "lfm2": {
        "model_type": "lfm2",
        "num_hidden_layers": 3,
        "norm_eps": 1e-5,
        "conv_bias": False,
        "conv_L_cache": 3,
        "block_dim": 64,
        "block_multiple_of": 32,
        "block_ffn_dim_multiplier": 1.0,
        "block_auto_adjust_ff_dim": False,
        "layer_types": ["conv", "full_attention", "conv"],
    },
    "qwen3_next": {
        "model_type": "qwen3_next",
        "num_hidden_layers": 4,
        "head_dim": 16,
        "linear_num_value_heads": 4,
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 16,
        "linear_value_head_dim": 16,
        "linear_conv_kernel_dim": 4,
        "full_attention_interval": 2,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 1,
        "shared_expert_intermediate_size": 32,
        "mlp_only_layers": [],
        "moe_intermediate_size": 32,
        "partial_rotary_factor": 0.5,
    },
    "falcon_h1": {
        "model_type": "falcon_h1",
        "num_hidden_layers": 2,
        "head_dim": 16,
        "mamba_d_ssm": 64,
        "mamba_n_heads": 4,
        "mamba_d_head": 16,
        "mamba_d_state": 8,
        "mamba_chunk_size": 8,
        "rope_theta": 10000.0,
    },
    # chunked attention (ChunkedKVCache): no exact rollback, plain decoding
    "llama4": {
        "model_type": "llama4",
        "text_config": {
            "model_type": "llama4_text",
            "attention_bias": False,
            "attention_chunk_size": WINDOW,
            "head_dim": 16,
            "hidden_size": 64,
            "interleave_moe_layer_step": 2,
            "intermediate_size": 64,
            "intermediate_size_mlp": 128,
            "max_position_embeddings": 4096,
            "num_attention_heads": 4,
            "num_experts_per_tok": 1,
            "num_hidden_layers": 4,
            "num_key_value_heads": 2,
            "num_local_experts": 2,
            "rms_norm_eps": 1e-5,
            "rope_scaling": None,
            "rope_theta": 10000.0,
            "use_qk_norm": True,
            "vocab_size": 259,
        },
    },
}


# Gemma 3's post-attention/feed-forward norms make random-weight text too random to ever
# repeat; scaled down (RMSNorm weight 1 + w), its greedy text loops as the others' does.
POST_NORM_SCALE = {"gemma3_text": 0.2}


def architecture_config(architecture: str, vocab_size: int) -> dict:
    return {**_COMMON, "vocab_size": vocab_size, **ARCHITECTURES[architecture]}


def make_tiny(architecture: str, vocab_size: int = 259, seed: int = 0, bits: int | None = None):
    """An in-memory random-weight model of ``architecture`` (float32, or quantized)."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx_lm.utils import _get_classes

    config = architecture_config(architecture, vocab_size)
    model_class, args_class = _get_classes(config)
    mx.random.seed(seed)
    model = model_class(args_class.from_dict(config))
    if architecture in POST_NORM_SCALE:
        for layer in model.layers:
            for norm in (layer.post_attention_layernorm, layer.post_feedforward_layernorm):
                norm.weight = mx.full(norm.weight.shape, POST_NORM_SCALE[architecture] - 1.0)
    if bits:
        nn.quantize(model, group_size=32, bits=bits)
        config["quantization"] = {"group_size": 32, "bits": bits}
    mx.eval(model.parameters())
    return model, config


def write_tiny(folder: Path, architecture: str, seed: int = 0, bits: int | None = None) -> Path:
    """A complete mlx-lm folder, quantized ones as mlx-community writes them (``quantization``)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_size = write_byte_tokenizer(folder)
    model, config = make_tiny(architecture, vocab_size, seed, bits)
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config))
    return folder
