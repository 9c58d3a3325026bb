"""Tiny random-weight models built inside the tests (no downloads, a few KB each).

``write_tiny_llama(folder)`` writes a complete mlx-lm model folder: a 2-layer float32
Llama with random weights and a byte-level tokenizer (every byte is one token, so a
multi-byte character spans several tokens) with a ChatML chat template.
"""

from __future__ import annotations

import json
from pathlib import Path

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
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
    wrapper = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|im_start|>",
                                      eos_token="<|im_end|>", unk_token="<|endoftext|>",
                                      pad_token="<|endoftext|>", clean_up_tokenization_spaces=False)
    wrapper.chat_template = CHATML
    wrapper.save_pretrained(str(folder))
    return len(vocab)


def tiny_llama_config(vocab_size: int, layers: int = 2, hidden: int = 64) -> dict:
    return {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden, "intermediate_size": hidden * 2, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-5,
        "vocab_size": vocab_size, "max_position_embeddings": 4096, "rope_theta": 10000.0,
        "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
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


def write_tiny_mamba(folder: Path, seed: int = 0) -> Path:
    """A random-weight Mamba: a real architecture whose cache cannot be rolled back."""
    import mlx.core as mx
    from mlx.utils import tree_flatten
    from mlx_lm.models import mamba

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab_size = write_byte_tokenizer(folder)
    config = {"model_type": "mamba", "vocab_size": vocab_size, "hidden_size": 32,
              "intermediate_size": 64, "state_size": 8, "num_hidden_layers": 2, "conv_kernel": 4,
              "use_bias": False, "use_conv_bias": True, "time_step_rank": 4,
              "tie_word_embeddings": True, "eos_token_id": 2}
    mx.random.seed(seed)
    model = mamba.Model(mamba.ModelArgs.from_dict(config))
    mx.eval(model.parameters())
    mx.save_safetensors(str(folder / "model.safetensors"), dict(tree_flatten(model.parameters())))
    (folder / "config.json").write_text(json.dumps(config))
    return folder
