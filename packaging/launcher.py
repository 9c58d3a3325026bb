"""Entry point of the frozen Draftless app (Draftless.app on macOS, dist/Draftless on Linux).

It only prepares the process for running outside a terminal and a checkout, then runs the
same ``app.__main__:main`` that ``python -m app`` runs, with the same arguments
(``--screenshot FILE [--prompt TEXT] [--model PATH]`` included).
"""

import multiprocessing
import os
import sys


def _prepare_frozen_process() -> None:
    # Started from Finder there may be no usable stdout/stderr; never crash on a print.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))
    # Finder starts apps with cwd "/"; nothing should depend on it, but keep it harmless.
    if getattr(sys, "frozen", False) and os.getcwd() == "/":
        os.chdir(os.path.expanduser("~"))
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    # Write only to Draftless' platformdirs folders: Hugging Face downloads (models named by
    # hub id) go to the app's cache folder instead of ~/.cache/huggingface.
    if getattr(sys, "frozen", False) and "HF_HOME" not in os.environ:
        from platformdirs import user_cache_dir

        os.environ["HF_HOME"] = os.path.join(
            user_cache_dir("Draftless", appauthor=False), "huggingface"
        )


def exit_status(code) -> int:
    """What ``sys.exit(code)`` would make the process return."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _exit_now(status: int) -> None:
    """End the frozen process without interpreter teardown.

    In the frozen build, the interpreter's final garbage collection crashed after a
    successful run in 2 of 3 launches here ("Fatal Python error: bool_dealloc", a refcount
    bug in one of the C extensions; never seen unfrozen). The app has saved and closed
    everything by then, so flush what is buffered and leave. DRAFTLESS_FULL_TEARDOWN=1
    keeps the normal teardown (for debugging that crash).
    """
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def main() -> int:
    multiprocessing.freeze_support()  # a spawned worker must not start a second app
    _prepare_frozen_process()
    from app.__main__ import main as app_main

    try:
        status = exit_status(app_main())
    except SystemExit as exit_:
        status = exit_status(exit_.code)
    if getattr(sys, "frozen", False) and not os.environ.get("DRAFTLESS_FULL_TEARDOWN"):
        _exit_now(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
