"""`python -m engine`: every flag explains itself; a fixed draft count can be asked for."""

import argparse

from engine.__main__ import build_parser, request_from_args


def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_every_flag_has_a_help_line():
    missing = []
    for command, sub in _subparsers(build_parser()):
        for action in sub._actions:
            if action.option_strings and action.dest != "help" and not action.help:
                missing.append(f"{command} {'/'.join(action.option_strings)}")
    assert missing == []


def test_generate_adaptive_flag_reaches_the_request():
    parser = build_parser()
    fixed = parser.parse_args(["generate", "--prompt", "hi", "--no-adaptive", "--draft-count", "7"])
    request = request_from_args(fixed, "hi", raw=False)
    assert request.draft.adaptive is False and request.draft.draft_count == 7
    default = parser.parse_args(["generate", "--prompt", "hi"])
    assert request_from_args(default, "hi", raw=False).draft.adaptive is True
    forced = parser.parse_args(["generate", "--prompt", "hi", "--adaptive"])
    assert request_from_args(forced, "hi", raw=False).draft.adaptive is True
