"""The user's settings: one dataclass, persisted as JSON in the config directory.

Values outside the engine's ranges are refused by the widgets. A settings file edited by
hand is checked against the engine's own ranges and drafter registry: a bad field falls
back to its default, the file is corrected and the original kept beside it, and the
message says so once. A file that is not UTF-8 JSON at all is moved aside and the defaults
used; one that cannot be read or kept aside is never saved over.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from engine import paths as engine_paths
from engine.drafters import resolve_drafter_name
from engine.errors import EngineError
from engine.formats.stop_strings import MAX_STOP_CHARS, MAX_STOPS, valid_stop_strings
from engine.settings import (
    DRAFT_COUNT_RANGE,
    MAX_TOKENS_RANGE,
    MIN_P_RANGE,
    NGRAM_ORDER_RANGE,
    REPETITION_PENALTY_RANGE,
    TOP_K_RANGE,
    DraftSettings,
    GenerationRequest,
    SamplingSettings,
)
from engine.untrusted import aside_path, move_aside, read_json, read_regular_file, write_atomic

TEMPERATURE_RANGE = (0.0, 5.0)
TOP_P_RANGE = (0.0, 1.0)
# 1 is off (the logits as they are); under 1 would reward repeating, which no chat wants
REPEAT_PENALTY_RANGE = (1.0, REPETITION_PENALTY_RANGE[1])
REPEAT_PENALTY_OFF = 1.0
STOP_STRINGS_RULE = f"at most {MAX_STOPS} stop strings, each 1 to {MAX_STOP_CHARS} characters"
ZOOM_RANGE = (0.5, 3.0)  # the transcript's text size, a factor of the normal size
VARIED_TEMPERATURE = 0.7  # "Regenerate with temperature 0.7": one answer that can differ
SETTINGS_FILE = "settings.json"
# The file holds a system prompt, which no model's window takes past ~4 MB of text (a
# million tokens), and JSON's escapes can double that: anything larger is not a settings file
MAX_SETTINGS_BYTES = 16 << 20


@dataclass(frozen=True)
class AppSettings:
    drafter: str = "default"
    draft_count: int = DraftSettings.draft_count
    ngram_order: int = DraftSettings.ngram_order
    ngram_min: int = DraftSettings.ngram_min
    adaptive: bool = DraftSettings.adaptive
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    min_p: float = 0.0  # 0: off
    repetition_penalty: float = REPEAT_PENALTY_OFF
    stop_strings: tuple[str, ...] = ()  # the answer ends before the first one it writes
    max_tokens: int = 512
    system_prompt: str = "You are a helpful assistant."
    model: str | None = None  # None: the embedded default; else a folder or a hub id
    highlight: bool = True
    zoom: float = 1.0
    server_url: str = ""  # the Draftless server last connected to (its key: the keychain)
    # the person's own presets, by name, in the order saved: each PRESET_FIELDS' values
    user_presets: dict[str, dict] = field(default_factory=dict)

    RANGES = {
        "draft_count": DRAFT_COUNT_RANGE,
        "ngram_order": NGRAM_ORDER_RANGE,
        "ngram_min": NGRAM_ORDER_RANGE,
        "max_tokens": MAX_TOKENS_RANGE,
        "temperature": TEMPERATURE_RANGE,
        "top_p": TOP_P_RANGE,
        "top_k": TOP_K_RANGE,
        "min_p": MIN_P_RANGE,
        "repetition_penalty": REPEAT_PENALTY_RANGE,
        "zoom": ZOOM_RANGE,
    }

    def problems(self) -> list[str]:
        """Why these values would be refused (empty when all is well)."""
        found = []
        for name, (low, high) in self.RANGES.items():
            value = getattr(self, name)
            if not low <= value <= high:
                found.append(f"{name} must be from {low} to {high} (was {value!r})")
        if self.ngram_min > self.ngram_order:
            found.append(f"ngram_min ({self.ngram_min}) exceeds ngram_order ({self.ngram_order})")
        if not valid_stop_strings(self.stop_strings):
            found.append(f"stop strings: {STOP_STRINGS_RULE}")
        return found

    def draft(self) -> DraftSettings:
        """How the engine drafts for these settings."""
        return DraftSettings(
            drafter=self.drafter,
            draft_count=self.draft_count,
            ngram_order=self.ngram_order,
            ngram_min=self.ngram_min,
            adaptive=self.adaptive,
        )

    def request(
        self, messages: list[dict[str, str]], chat_id: str | None = None
    ) -> GenerationRequest:
        """The engine request for the next answer; the system prompt goes first."""
        turns = list(messages)
        if self.system_prompt.strip():
            turns.insert(0, {"role": "system", "content": self.system_prompt})
        return GenerationRequest(
            messages=turns,
            model=self.model,
            chat_id=chat_id,
            max_tokens=self.max_tokens,
            draft=self.draft(),
            sampling=SamplingSettings(
                temperature=float(self.temperature),
                top_p=float(self.top_p),
                top_k=self.top_k,
                min_p=float(self.min_p),
                repetition_penalty=(
                    None
                    if self.repetition_penalty == REPEAT_PENALTY_OFF
                    else float(self.repetition_penalty)
                ),
            ),
        )


# how the settings panel writes a stop string on one line: a line break as \n, a tab as \t
# and a backslash as \\
_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\"}


def stop_strings_from_text(text: str) -> tuple[str, ...]:
    """The stop strings the panel's box holds: one a line, escapes as ``_ESCAPES`` says."""
    return tuple(
        re.sub(r"\\([nt\\])", lambda m: _ESCAPES[m.group(1)], line)
        for line in text.split("\n")
        if line
    )


def stop_strings_text(stops) -> str:
    """The panel's box for ``stops`` (``stop_strings_from_text`` reads it back)."""
    return "\n".join(
        s.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t") for s in stops
    )


def _coerce(field_type, value):
    """``value`` as the field's type, or raise ValueError."""
    kind = field_type if isinstance(field_type, str) else getattr(field_type, "__name__", "")
    if kind == "bool":
        if isinstance(value, bool):
            return value
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    elif kind == "str":
        if isinstance(value, str):
            return value
    elif kind.startswith("tuple"):  # the stop strings
        if valid_stop_strings(value):
            return tuple(value)
        raise ValueError(f"{value!r} is not a list of {STOP_STRINGS_RULE}")
    elif "None" in kind:  # str | None
        if value is None or isinstance(value, str):
            return value or None
    raise ValueError(f"{value!r} is not a {kind}")


class SettingsStore:
    """Loads and saves ``AppSettings``; ``message`` tells what was wrong with the file."""

    def __init__(self, folder: Path | None = None):
        self.path = Path(folder or engine_paths.config_dir()) / SETTINGS_FILE
        self.message: str | None = None
        self.protected = False  # a file that could not be read nor kept aside: never overwritten

    def load(self) -> AppSettings:
        self.message = None
        self.protected = False
        try:
            data = read_json(self.path, MAX_SETTINGS_BYTES)
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except FileNotFoundError:
            return AppSettings()
        except OSError as error:
            self.protected = True
            self.message = (
                f"The settings file {self.path} could not be read ({error}); "
                "the defaults are used and the file is left as it is."
            )
            return AppSettings()
        except ValueError as error:  # not a regular file, too large, not JSON, too deep
            kept = self._keep_aside("corrupt", move=True)
            self.message = (
                f"The settings file {self.path} could not be read ({error}); "
                f"the defaults are used. {kept}"
            )
            return AppSettings()
        settings, bad = _validated(data)
        if bad:
            kept = self._keep_aside("invalid", move=False)
            try:
                self.save(settings)  # corrected, so this is said once, not at every start
            except OSError:
                pass
            self.message = (
                "Some saved settings were invalid and were reset to their defaults or left "
                f"out: {'; '.join(b.rstrip('.') for b in bad)}. {kept}"
            )
        return settings

    def _keep_aside(self, why: str, move: bool) -> str:
        """Keep the file as it is under a new name; a sentence saying where (or why not).
        A file that cannot be kept is protected: this run does not save over it."""
        try:
            if move:
                target = move_aside(self.path, why)
            else:
                target = aside_path(self.path, why)
                target.write_bytes(read_regular_file(self.path, MAX_SETTINGS_BYTES))
        except (OSError, ValueError) as error:  # ValueError: replaced meanwhile
            self.protected = True
            return (
                f"The file could not be kept aside ({error}) and is left as it is; "
                "settings changed now are not saved."
            )
        return f"The original file was kept as {target.name}."

    def save(self, settings: AppSettings) -> None:
        """Written whole and flushed to the disk before it replaces the old file
        (``engine.untrusted.write_atomic``): a crash leaves the old file or the new one."""
        if self.protected:
            raise OSError(f"{self.path} is left as it is because it could not be read")
        data = {k: v for k, v in asdict(settings).items() if k != "RANGES"}
        write_atomic(self.path, json.dumps(data, indent=2))


def _validated(data: dict) -> tuple[AppSettings, list[str]]:
    """Settings from a file's JSON object, each bad field at its default, and what was bad."""
    defaults = AppSettings()
    values, bad = {}, []
    if "user_presets" in data:
        values["user_presets"], damaged = _checked_presets(data["user_presets"])
        bad += damaged
    for f in fields(AppSettings):
        if f.name in data and f.name != "user_presets":
            try:
                values[f.name] = _coerce(f.type, data[f.name])
            except ValueError as error:
                bad.append(f"{f.name} ({error})")
    settings = replace(defaults, **values)
    for name, (low, high) in AppSettings.RANGES.items():
        value = getattr(settings, name)
        if not low <= value <= high:
            bad.append(f"{name} must be from {low} to {high} (was {value!r})")
            settings = replace(settings, **{name: getattr(defaults, name)})
    if settings.ngram_min > settings.ngram_order:
        bad.append(
            f"ngram_min ({settings.ngram_min}) exceeded ngram_order ({settings.ngram_order})"
        )
        settings = replace(settings, ngram_min=min(defaults.ngram_min, settings.ngram_order))
    try:
        resolve_drafter_name(settings.drafter)
    except EngineError as error:
        bad.append(f"drafter: {error}")
        settings = replace(settings, drafter=defaults.drafter)
    return settings, bad


# Presets set the drafting and sampling fields only; the model, the system prompt, the stop
# strings and the view (highlight, zoom) stay as they are.
PRESET_FIELDS = (
    "drafter",
    "draft_count",
    "ngram_order",
    "ngram_min",
    "adaptive",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "max_tokens",
)
BALANCED = "Balanced"
CUSTOM = "Custom"  # what the preset list says once a value differs from every preset
MAX_PRESET_NAME = 60  # characters: a name fits the preset list beside a 600 px chat
PRESETS: dict[str, dict] = {
    BALANCED: {name: getattr(AppSettings(), name) for name in PRESET_FIELDS},
    # Edits copy long stretches of the code they are given. Greedy, so copies come out
    # exactly; the draft count stays at its top (the adaptive policy sends what pays on the
    # verify-cost curve); n-gram drafters match up to 8 tokens of context, which tells
    # repeated lines of code apart better than 4; answers may be whole files.
    "Code editing": {
        "drafter": "default",
        "draft_count": DRAFT_COUNT_RANGE[1],
        "ngram_order": 8,
        "ngram_min": 1,
        "adaptive": True,
        "temperature": 0.0,
        "top_p": 1.0,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": REPEAT_PENALTY_OFF,  # a copy repeats on purpose
        "max_tokens": 2048,
    },
    # Sampled text repeats its context less and a sampled token can differ from a drafted
    # one, so long drafts are mostly verified in vain: at most 8 per pass.
    "Creative": {
        "drafter": "default",
        "draft_count": 8,
        "ngram_order": 4,
        "ngram_min": 1,
        "adaptive": True,
        "temperature": 0.8,
        "top_p": 0.95,
        "top_k": 0,
        "min_p": 0.0,
        "repetition_penalty": REPEAT_PENALTY_OFF,
        "max_tokens": 1024,
    },
}


def preset_name(text: str) -> str:
    """``text`` as a user preset's name (blanks collapsed); ValueError saying why it cannot
    be one. A built-in name is refused, whatever its case."""
    name = " ".join(text.split())
    if not name:
        raise ValueError("a preset needs a name")
    if len(name) > MAX_PRESET_NAME:
        raise ValueError(f"a preset's name has at most {MAX_PRESET_NAME} characters")
    for taken in (*PRESETS, CUSTOM):
        if taken.casefold() == name.casefold():
            raise ValueError(f"“{taken}” is a built-in preset's name; choose another")
    return name


def user_preset_named(settings: AppSettings, name: str) -> str | None:
    """The user preset called ``name`` (case aside), or None."""
    return next((n for n in settings.user_presets if n.casefold() == name.casefold()), None)


def with_saved_preset(settings: AppSettings, name: str) -> AppSettings:
    """``settings`` with their drafting and sampling values kept as the user preset
    ``name``; a preset of that name (case aside) is replaced where it stands in the list."""
    name = preset_name(name)
    values = {key: getattr(settings, key) for key in PRESET_FIELDS}
    old = user_preset_named(settings, name)
    presets = {
        (name if n == old else n): (values if n == old else v)
        for n, v in settings.user_presets.items()
    }
    presets.setdefault(name, values)
    return replace(settings, user_presets=presets)


def without_preset(settings: AppSettings, name: str) -> AppSettings:
    """``settings`` without the user preset ``name``; the values in use stay."""
    presets = {n: v for n, v in settings.user_presets.items() if n != name}
    return replace(settings, user_presets=presets)


def all_presets(settings: AppSettings) -> dict[str, dict]:
    """The built-in presets, then the user's own."""
    return {**PRESETS, **settings.user_presets}


def with_preset(settings: AppSettings, name: str) -> AppSettings:
    """``settings`` with preset ``name``'s drafting and sampling values."""
    return replace(settings, **all_presets(settings)[name])


def preset_of(settings: AppSettings) -> str | None:
    """The preset these settings are exactly, or None (changed by hand since)."""
    for name, values in all_presets(settings).items():
        if all(_same(key, getattr(settings, key), value) for key, value in values.items()):
            return name
    return None


def _checked_presets(raw) -> tuple[dict[str, dict], list[str]]:
    """The sound user presets of a settings file's ``user_presets``, and why each other
    one was left out."""
    if not isinstance(raw, dict):
        return {}, [f"user_presets ({raw!r:.60} is not an object of named presets)"]
    kept, bad = {}, []
    for name, values in raw.items():
        try:
            if preset_name(name) != name:
                raise ValueError("its name has blanks at its ends or in a row")
            if user_preset_named(replace(AppSettings(), user_presets=kept), name):
                raise ValueError("another preset has this name")
            kept[name] = _preset_values(values)
        except ValueError as error:
            bad.append(f"preset {name!r:.70} left out ({error})")
    return kept, bad


def _preset_values(values) -> dict:
    """A stored preset's values, each of its field's type and in range; else ValueError."""
    if not isinstance(values, dict):
        raise ValueError("not an object of values")
    missing = [key for key in PRESET_FIELDS if key not in values]
    if missing:
        raise ValueError(f"{', '.join(missing)} missing")
    types = {f.name: f.type for f in fields(AppSettings)}
    checked = {key: _coerce(types[key], values[key]) for key in PRESET_FIELDS}
    settings = replace(AppSettings(), **checked)
    problems = settings.problems()
    if problems:
        raise ValueError("; ".join(problems))
    try:
        resolve_drafter_name(settings.drafter)
    except EngineError as error:
        raise ValueError(f"drafter: {error}") from None
    return checked


def _same(key: str, ours, preset) -> bool:
    if key == "drafter":  # "default" and the default drafter's own name are one drafter
        try:
            return resolve_drafter_name(ours) == resolve_drafter_name(preset)
        except EngineError:
            return False
    return ours == preset


def reset_to_defaults(settings: AppSettings) -> AppSettings:
    """The defaults of everything the settings panel shows (drafting, sampling, system
    prompt); the model in use, the server address, the view (highlight, zoom) and the
    user's presets stay."""
    return replace(
        AppSettings(),
        model=settings.model,
        server_url=settings.server_url,
        highlight=settings.highlight,
        zoom=settings.zoom,
        user_presets=settings.user_presets,
    )
