"""A text completion keeps every byte of its tokens: the answer's first token " Paris" reads
" Paris", not "Paris" (mlx-lm's streaming detokenizers drop a space that begins the text),
and the server's logprobs offsets match the token texts."""

from engine.events import DoneEvent, TokenEvent
from engine.models import LoadedModel
from engine.runtime.session import ChatSession
from engine.server.responses import Shaper
from engine.settings import DraftSettings, GenerationRequest

from .scripted_model import ScriptedModel
from .tool_model import load_tool_tokenizer

PROMPT = "The capital of France is"
ANSWER = " Paris. \u00e9t\u00e9 \U0001f600 end"


def answer(tmp_path, raw: bool):
    tokenizer = load_tool_tokenizer(tmp_path)
    if raw:
        request = GenerationRequest(prompt=PROMPT, raw=True, max_tokens=60, logprobs=2)
        prompt = list(tokenizer.encode(PROMPT))
    else:
        request = GenerationRequest(messages=[{"role": "user", "content": PROMPT}], max_tokens=60)
        prompt = list(tokenizer.apply_chat_template(request.messages, add_generation_prompt=True))
    script = prompt + list(tokenizer.encode(ANSWER, add_special_tokens=False))
    script += [tokenizer.eos_token_id] * 80
    loaded = LoadedModel(
        "scripted", tmp_path, ScriptedModel(script, vocab_size=259), tokenizer, {}, "on (one row)"
    )
    request = GenerationRequest(**{**request.__dict__, "draft": DraftSettings(drafter="none")})
    return list(ChatSession(loaded).generate(request.validated()))


def test_a_text_completion_keeps_its_leading_space_and_every_byte(tmp_path):
    events = answer(tmp_path, raw=True)
    tokens = [e for e in events if isinstance(e, TokenEvent)]
    done = events[-1]
    assert isinstance(done, DoneEvent) and done.text == ANSWER
    assert "".join(t.text for t in tokens) == ANSWER
    shaped = Shaper(False, "scripted").logprobs(tokens)
    assert "".join(shaped["tokens"]).startswith(" Paris. ")
    offsets = shaped["text_offset"]
    for offset, token in zip(offsets, shaped["tokens"]):  # each token's text where it starts
        if "\ufffd" not in token:  # (a byte of a character split over tokens)
            assert ANSWER[offset : offset + len(token)] == token
    assert offsets[0] == 0 and offsets == sorted(offsets) and offsets[-1] < len(ANSWER)


def test_a_chat_answer_still_starts_at_its_first_word(tmp_path):
    done = answer(tmp_path, raw=False)[-1]
    assert done.text == ANSWER.lstrip(" ")  # chat answers drop the leading space, as mlx-lm does
