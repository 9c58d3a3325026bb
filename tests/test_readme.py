"""The README is for users: short, undated, with the two commands exactly as CI runs them, and
every project file it names present. How each figure is made lives in
resources/readme/benchmarks/method.md and what the figures are in results.md beside it; their
named files are checked the same way."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
METHOD = ROOT / "resources" / "readme" / "benchmarks" / "method.md"
RESULTS = METHOD.parent / "results.md"
# A README a user reads through: what Draftless is, the two commands, the app, the command
# line, the server and the benchmark headline; the rest belongs in METHOD and RESULTS.
MOST_README_LINES = 350
COMMANDS = (  # .ci/run runs the second
    "DRAFTLESS_SYSTEM_PACKAGES=1 bash packaging/dev.sh run",
    "DRAFTLESS_SYSTEM_PACKAGES=1 bash packaging/dev.sh test",
)
ISO_DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
# The project's own top-level folders: a code span starting with one names a repository file.
PROJECT_FOLDERS = ("app/", "engine/", "packaging/", "resources/", "tests/")
FENCED_BLOCK = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`([^`\s]+)`")
GLOB_CHARACTERS = re.compile(r"[*?\[]")


def missing_paths(text: str, folder: Path) -> list[str]:
    """The relative link targets (from ``folder``) and project paths in code spans (from the
    repository's root) in ``text`` that name no existing file or folder. Fenced code blocks
    are left out: their paths are examples (``notes.txt``, ``dist/…``)."""
    prose = FENCED_BLOCK.sub("", text)
    named = [
        (folder, target.split("#")[0])
        for target in LINK_TARGET.findall(prose)
        if not re.match(r"[a-z][a-z0-9+.-]*:|#", target)
    ]
    named += [(ROOT, span) for span in CODE_SPAN.findall(prose) if span.startswith(PROJECT_FOLDERS)]
    return [path for base, path in named if not _exists(base, path.rstrip("/"))]


def _exists(base: Path, path: str) -> bool:
    if GLOB_CHARACTERS.search(path):
        return any(base.glob(path))
    return (base / path).exists()


def test_the_readme_is_short():
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines <= MOST_README_LINES, (
        f"README.md has {lines} lines, more than {MOST_README_LINES}: move method and "
        f"measurements to {METHOD.relative_to(ROOT)} and {RESULTS.relative_to(ROOT)}"
    )


@pytest.mark.parametrize("document", [README, METHOD, RESULTS], ids=["README", "method", "results"])
def test_no_iso_dates(document):
    """What is true now carries no date; when something changed is in the commit messages."""
    dates = ISO_DATE.findall(document.read_text(encoding="utf-8"))
    assert dates == [], f"{document.relative_to(ROOT)} names dates: {dates}"


@pytest.mark.parametrize("command", COMMANDS)
def test_the_two_commands_are_there_exactly(command):
    assert command in README.read_text(encoding="utf-8")


@pytest.mark.parametrize("document", [README, METHOD, RESULTS], ids=["README", "method", "results"])
def test_every_named_project_file_exists(document):
    text = document.read_text(encoding="utf-8")
    assert missing_paths(text, document.parent) == []


def test_a_missing_file_is_found_in_links_spans_and_globs():
    text = (
        "See [the method](resources/readme/no-such.md), `engine/no_such.py`, "
        "`tests/test_no_such_*.py` and [a section](#server). Kept: `engine/loop/decode.py`, "
        "[the screenshot](resources/readme/screenshot.png), `tests/test_server_*.py`, "
        "`engine/curves/`, [a site](https://example.com/x), `downloads/<org>--<name>`.\n"
        "```bash\npython engine/example_only.py\n```\n"
    )
    assert missing_paths(text, ROOT) == [
        "resources/readme/no-such.md",
        "engine/no_such.py",
        "tests/test_no_such_*.py",
    ]
