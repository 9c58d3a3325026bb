"""Placeholder until the GUI lands: chat with the engine on the command line."""

import sys


def main() -> int:
    from engine.__main__ import main as engine_main

    prompt = " ".join(sys.argv[1:]) or input("You: ")
    return engine_main(["generate", "--prompt", prompt])


if __name__ == "__main__":
    sys.exit(main())
