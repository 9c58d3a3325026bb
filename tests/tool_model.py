"""A model that answers a tool call: a byte-level tokenizer whose chat template takes tools
(Hermes/Qwen style, ``<tool_call>{json}</tool_call>``) over a scripted target that emits a
given answer after whatever prompt it gets (or over a given model), served in process by
the real engine session.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from engine.models import LoadedModel
from engine.runtime.session import ChatSession, prompt_tokens

from .scripted_engine import ScriptedStream
from .scripted_model import ScriptedModel
from .server_process import free_port
from .tiny_model import write_byte_tokenizer

TOOL_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools:\n{%- for tool in tools %}\n{{ tool | tojson }}"
    "{%- endfor %}\nCall one as <tool_call>{\"name\": …, \"arguments\": …}</tool_call><|im_end|>\n"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant\n"
    "{%- for tool_call in message.tool_calls %}{%- set tool_call = tool_call.function %}"
    "<tool_call>{\"name\": \"{{ tool_call.name }}\", \"arguments\": "
    "{{ tool_call.arguments | tojson }}}</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- elif message.role == 'tool' %}<|im_start|>user\n<tool_response>{{ message.content }}"
    "</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)


def load_tool_tokenizer(folder: Path):
    from mlx_lm.tokenizer_utils import load as load_tokenizer

    write_byte_tokenizer(folder)
    config = folder / "tokenizer_config.json"
    settings = json.loads(config.read_text())
    settings["chat_template"] = TOOL_TEMPLATE
    config.write_text(json.dumps(settings))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    return load_tokenizer(folder)


def error_stream(error: Exception) -> ScriptedStream:
    from engine.events import ErrorEvent

    return ScriptedStream([ErrorEvent(str(error))])


def answer_stream(loaded: LoadedModel, request) -> ScriptedStream:
    """The engine's whole answer to ``request``, through a real ``ChatSession``."""
    try:
        return ScriptedStream(list(ChatSession(loaded).generate(request)))
    except Exception as error:
        return error_stream(error)


class LoadedService:
    """Answers each request with a loaded model (a fresh ``ChatSession`` each)."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded

    def generate(self, request):
        return answer_stream(self.loaded, request)

    def shutdown(self):
        pass


class ToolService:
    """Answers each request with the next queued text, through a real ``ChatSession``."""

    def __init__(self, folder: Path, model=None, tool_template: bool = True):
        """``tool_template`` False: the byte tokenizer's plain ChatML template (no tools),
        so the engine uses the generic format."""
        if tool_template:
            self.tokenizer = load_tool_tokenizer(folder)
        else:
            from mlx_lm.tokenizer_utils import load as load_tokenizer

            write_byte_tokenizer(folder)
            self.tokenizer = load_tokenizer(folder)
        self.folder = folder
        self.model = model  # a real model instead of the scripted answers
        self.answers: list[str] = []
        self.prompts: list[str] = []

    def generate(self, request):
        loaded = LoadedModel(
            "tool-model", self.folder, None, self.tokenizer, {}, "on (one row: scripted)"
        )
        try:
            prompt = prompt_tokens(loaded, request)
            if self.model is not None:
                loaded.model = self.model
            else:
                answer = list(self.tokenizer.encode(self.answers.pop(0), add_special_tokens=False))
                loaded.model = ScriptedModel(
                    prompt + answer + [self.tokenizer.eos_token_id] * 80, vocab_size=259
                )
            self.prompts.append(self.tokenizer.decode(prompt))
        except Exception as error:
            return error_stream(error)
        return answer_stream(loaded, request)

    def shutdown(self):
        pass


class InProcessServer:
    """The real app under uvicorn in a thread, on a free 127.0.0.1 port."""

    def __init__(self, service, name="tool-model", model_facts: dict | None = None):
        import uvicorn

        from engine.server.app import ServerOptions, create_app
        from engine.server.guard import allowed_hosts
        from engine.server.requests import Defaults

        self.port = free_port()
        app = create_app(
            service,
            ServerOptions(
                name,
                Defaults(),
                hosts=allowed_hosts("127.0.0.1", self.port),
                model_facts=model_facts or {},
            ),
        )
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self):
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
