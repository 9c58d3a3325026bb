import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import platformdirs  # noqa: E402
import pytest  # noqa: E402

# Tests write cost curves, n-gram memory and settings to a scratch folder, but reuse the
# converted built-in model from the real cache (converting it takes ~15 s).
_scratch = tempfile.mkdtemp(prefix="draftless-tests-")
atexit.register(shutil.rmtree, _scratch, True)
os.environ.setdefault(
    "DRAFTLESS_MODELS_DIR",
    os.path.join(
        os.environ.get("DRAFTLESS_CACHE_DIR") or platformdirs.user_cache_dir("Draftless"), "models"
    ),
)
for _name in ("CACHE", "DATA", "CONFIG"):
    os.environ[f"DRAFTLESS_{_name}_DIR"] = os.path.join(_scratch, _name.lower())

import engine  # noqa: E402,F401  (preloads OpenBLAS before anything imports mlx)

from .tiny_model import write_tiny_llama  # noqa: E402


@pytest.fixture
def private_dirs(tmp_path, monkeypatch):
    """A data and cache folder of the test's own (cost curves, n-gram memory, settings)."""
    monkeypatch.setenv("DRAFTLESS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("DRAFTLESS_CACHE_DIR", str(tmp_path / "cache"))


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
