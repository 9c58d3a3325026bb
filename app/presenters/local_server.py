"""A Draftless server started from the app: ``python -m engine serve`` as a child process,
its state (starting, running, stopped, failed with a reason) and its last log lines.

Why a child process and not a server inside the app: the server's answers are decoded in
another process, so they never compete with the chat in the app's engine thread, a server
that crashes or runs out of memory never takes the app down, and stopping it is ending a
process, which always works. What it costs: the model is loaded a second time, in the
child, so serving the chat's model holds it in memory twice, and the child's start
(imports, loading the model) takes seconds.

The child is ready when ``GET /health`` answers 200; it is polled until ``start_seconds``.
"""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import socket
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtCore import (
    QElapsedTimer,
    QObject,
    QProcess,
    QProcessEnvironment,
    QTimer,
    QUrl,
    Signal,
)
from PySide6.QtNetwork import QNetworkAccessManager, QNetworkReply, QNetworkRequest

from engine.api import SERVER_KEY_VARIABLE

LOG_LINES = 500  # the child's output kept and shown
LONGEST_LINE = 4000  # characters of one log line kept (a child may write without newlines)
START_SECONDS = 300  # a big model may take minutes to load before the server listens
STOP_SECONDS = 10  # the child ends its answers and saves its memory, else it is killed
POLL_MS = 300  # how often /health is asked while the child starts
LOCAL_HOST = "127.0.0.1"
NETWORK_HOST = "0.0.0.0"

STOPPED, STARTING, RUNNING, STOPPING, FAILED = (
    "stopped",
    "starting",
    "running",
    "stopping",
    "failed",
)


@dataclass(frozen=True)
class Launch:
    """What to serve and how: ``model`` None is the built-in model."""

    model: str | None
    port: int
    on_network: bool = False
    api_key: str | None = None

    @property
    def host(self) -> str:
        return NETWORK_HOST if self.on_network else LOCAL_HOST

    @property
    def address(self) -> str:
        """Where this machine reaches it."""
        return f"http://{LOCAL_HOST}:{self.port}"

    def arguments(self) -> list[str]:
        """The child's command line after the interpreter; the key travels in its
        environment, never here (other users of the machine can read command lines)."""
        model = ["--model", self.model] if self.model else []
        return ["-m", "engine", "serve", "--host", self.host, "--port", str(self.port), *model]


def why_not_startable(launch: Launch) -> str:
    """A reason the server cannot start as asked, in plain words, or ""."""
    if getattr(sys, "frozen", False):
        return (
            "The packaged app cannot start a server yet: run `python -m engine serve` "
            "from a Draftless checkout instead."
        )
    if launch.on_network and not launch.api_key:
        return (
            "Set an API key to serve on the network: without one, anyone who can reach "
            "this machine could use it."
        )
    return port_problem(launch.host, launch.port)


def port_problem(host: str, port: int) -> str:
    """Why ``port`` cannot be listened on, or "" (checked before the model loads, which
    takes seconds, so a port in use fails at once)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
        try:
            probe.bind((host, port))
        except OSError as error:
            return port_failure(port, error.errno)
    return ""


def port_failure(port: int, code: int | None) -> str:
    if code == errno.EADDRINUSE:
        return (
            f"Port {port} is in use by another program: choose another port, or stop that program."
        )
    if code == errno.EACCES:
        return f"Port {port} needs administrator rights here: choose one above 1023."
    return f"Cannot listen on port {port} ({os.strerror(code or 0)}): choose another port."


def failure_from_log(lines, port: int) -> str:
    """The plain reason in the child's last lines, or ""."""
    for line in reversed(lines):
        if "address already in use" in line.lower():
            return port_failure(port, errno.EADDRINUSE)
        if line.startswith("error: "):  # the engine's own words (a model that did not load)
            return line[len("error: ") :]
    return ""


def child_environment(api_key: str | None) -> QProcessEnvironment:
    """The app's environment (its data folders: the same models and caches), the engine
    package importable wherever the app was started from, and the key."""
    environment = QProcessEnvironment.systemEnvironment()
    source = Path(importlib.util.find_spec("engine").origin).parent.parent
    paths = [str(source), environment.value("PYTHONPATH", "")]
    environment.insert("PYTHONPATH", os.pathsep.join(p for p in paths if p))
    environment.insert("PYTHONUNBUFFERED", "1")  # its log lines arrive as they are written
    if api_key:
        environment.insert(SERVER_KEY_VARIABLE, api_key)
    else:
        environment.remove(SERVER_KEY_VARIABLE)
    return environment


class LocalServer(QObject):
    stateChanged = Signal(str, str)  # state, what to say (the address, or why it failed)
    logged = Signal(str)  # one line of the child's output

    def __init__(self, parent=None, start_seconds: float = START_SECONDS):
        super().__init__(parent)
        self.start_seconds = start_seconds
        self.state, self.detail = STOPPED, ""
        self.launch: Launch | None = None
        self.model_name = ""  # as the running server names it (its /health)
        self.lines: deque[str] = deque(maxlen=LOG_LINES)
        self._partial = ""
        self.process: QProcess | None = None
        self._network = QNetworkAccessManager(self)
        self._poll = QTimer(self)
        self._poll.setInterval(POLL_MS)
        self._poll.timeout.connect(self._ask_health)
        self._asking: QNetworkReply | None = None
        self._clock = QElapsedTimer()
        self._ends_as: tuple[str, str] | None = None  # the state once an asked stop is done

    @property
    def active(self) -> bool:
        return self.state in (STARTING, RUNNING, STOPPING)

    def start(self, launch: Launch) -> bool:
        """Start the child; False (state failed, with the reason) when it cannot."""
        if self.active:
            return False
        self.launch, self.model_name = launch, ""
        reason = why_not_startable(launch)
        if reason:
            self._set(FAILED, reason)
            return False
        self._note(f"$ python {' '.join(launch.arguments())}")
        process = self.process = QProcess(self)
        process.setProcessChannelMode(QProcess.MergedChannels)
        process.setProcessEnvironment(child_environment(launch.api_key))
        process.readyReadStandardOutput.connect(lambda: self._read(process))
        process.finished.connect(lambda code, status: self._ended(process, code, status))
        process.errorOccurred.connect(lambda error: self._error(process, error))
        self._ends_as = None
        self._set(STARTING, f"loading the model, then listening on port {launch.port}")
        self._clock.start()
        process.start(sys.executable, launch.arguments())
        self._poll.start()
        return True

    def stop(self, ends_as: tuple[str, str] = (STOPPED, "")) -> None:
        """Ask the child to stop (as Ctrl-C would: its answers end, its memory is saved);
        killed if it has not after ``STOP_SECONDS``. Once it has, the state is ``ends_as``."""
        process = self.process
        if process is None or process.state() == QProcess.NotRunning:
            return
        self._poll.stop()
        self._ends_as = ends_as
        self._set(STOPPING, "")
        process.terminate()
        QTimer.singleShot(STOP_SECONDS * 1000, process, process.kill)

    def shutdown(self) -> None:
        """Stop the child before the app quits, waiting for it (bounded)."""
        process = self.process
        if process is None or process.state() == QProcess.NotRunning:
            return
        self.stop()
        if not process.waitForFinished(STOP_SECONDS * 1000):
            process.kill()
            process.waitForFinished(2000)

    # the child's output and end -----------------------------------------------------------
    def _read(self, process: QProcess) -> None:
        text = self._partial + bytes(process.readAllStandardOutput()).decode("utf-8", "replace")
        *lines, self._partial = text.replace("\r\n", "\n").split("\n")
        if len(self._partial) > LONGEST_LINE:
            lines.append(self._partial)
            self._partial = ""
        for line in lines:
            self._note(line[:LONGEST_LINE])

    def _note(self, line: str) -> None:
        self.lines.append(line)
        self.logged.emit(line)

    def _ended(self, process: QProcess, code: int, status) -> None:
        if process is not self.process:
            return
        self._read(process)
        if self._partial:
            self._note(self._partial)
            self._partial = ""
        self._poll.stop()
        self.process = None
        process.deleteLater()
        if self._ends_as is not None:
            self._set(*self._ends_as)
            return
        port = self.launch.port if self.launch else 0
        reason = failure_from_log(self.lines, port)
        if self.state == STARTING:
            self._set(
                FAILED, reason or f"The server stopped before it was ready ({_how(code, status)})."
            )
        else:
            self._set(
                FAILED, f"The server stopped by itself ({_how(code, status)}). {reason}".strip()
            )

    def _error(self, process: QProcess, error) -> None:
        if error == QProcess.FailedToStart and process is self.process:
            self._poll.stop()
            self.process = None
            self._set(FAILED, f"Could not run {sys.executable}: {process.errorString()}")

    # readiness ----------------------------------------------------------------------------
    def _ask_health(self) -> None:
        if self.state != STARTING or self._asking is not None:
            return
        if self._clock.elapsed() > self.start_seconds * 1000:
            seconds = round(self.start_seconds)
            self.stop((FAILED, f"The server did not answer within {seconds} s: see its log."))
            return
        request = QNetworkRequest(QUrl(f"{self.launch.address}/health"))
        request.setTransferTimeout(2000)
        if self.launch.api_key:  # with the key, /health names the model
            request.setRawHeader(b"Authorization", f"Bearer {self.launch.api_key}".encode())
        self._asking = reply = self._network.get(request)
        reply.finished.connect(lambda: self._health_answered(reply))

    def _health_answered(self, reply: QNetworkReply) -> None:
        self._asking = None
        reply.deleteLater()
        status = reply.attribute(QNetworkRequest.HttpStatusCodeAttribute)
        if self.state != STARTING or status != 200:
            return
        body = bytes(reply.readAll())
        try:
            self.model_name = str(json.loads(body).get("model", ""))
        except (ValueError, AttributeError):
            self.model_name = ""
        self._poll.stop()
        self._set(RUNNING, self.launch.address)

    def _set(self, state: str, detail: str) -> None:
        self.state, self.detail = state, detail
        self.stateChanged.emit(state, detail)


def _how(code: int, status) -> str:
    return "it crashed" if status == QProcess.CrashExit else f"exit code {code}"
