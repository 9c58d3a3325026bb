import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402

import engine  # noqa: E402,F401  (preloads OpenBLAS before anything imports mlx)

from .tiny_model import write_tiny_llama  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """A complete mlx-lm folder: random-weight 2-layer Llama, byte-level ChatML tokenizer."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_loaded(tiny_model_dir):
    from engine.models import load_model

    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="session")
def embedded_loaded():
    """The embedded SmolLM2-135M-Instruct (converted once into the user cache)."""
    from engine.models import load_model

    return load_model(None)
