"""ModelControl on its own, without a window or a chat controller: it loads through the
service it was given, remembers what loaded through the settings callback, and refuses to
switch engines while an answer runs."""

import asyncio

from app.presenters.model_control import ModelControl
from app.storage.settings import AppSettings

from .scripted_engine import ScriptedService


def make_control(busy=False):
    service = ScriptedService()
    state = {"settings": AppSettings(), "busy": busy}

    def update(settings):
        state["settings"] = settings

    control = ModelControl(
        service,
        settings=lambda: state["settings"],
        update_settings=update,
        is_busy=lambda: state["busy"],
        spawn=asyncio.ensure_future,
    )
    return control, service, state


def test_a_model_that_loads_is_shown_and_remembered():
    async def run():
        control, service, state = make_control()
        changed, finished = [], []
        control.modelChanged.connect(lambda *args: changed.append(args))
        control.loadFinished.connect(lambda ok, why: finished.append((ok, why)))
        assert await control.load_model("/some/folder")
        return control, service, state, changed, finished

    control, service, state, changed, finished = asyncio.run(run())
    assert service.loads == ["/some/folder"]
    assert changed == [("scripted-model", "/nowhere", "on")]
    assert control.model_name == "scripted-model" and not control.loading
    assert finished == [(True, "")]
    assert state["settings"].model == "/some/folder"


def test_no_engine_switch_while_an_answer_runs():
    control, service, _ = make_control(busy=True)
    problems = []
    control.problem.connect(problems.append)
    other = ScriptedService()
    assert control.use_engine(other) is None
    assert control.service is service and other.loads == []
    assert problems and "Stop the answer" in problems[0]
