"""One running app per data folder: a second launch brings the first window forward.

Two instances on one data folder would both write into the same chats. The first launch
holds a ``QLockFile`` and listens on a ``QLocalServer``, both named after the data folder;
a later launch finds the lock taken, asks the running one to show its window and exits.
The lock file records the holder's process id, so a lock left by a killed process is
taken over at once (Qt checks whether that process still runs).
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QLockFile, QObject, Signal
from PySide6.QtNetwork import QLocalServer, QLocalSocket

ACTIVATE = b"activate\n"
CONNECT_TRIES_S = 5.0  # the running app may still be starting: it listens right after the lock


def instance_key(data_folder: Path) -> str:
    digest = hashlib.sha256(str(Path(data_folder).resolve()).encode()).hexdigest()[:16]
    return f"draftless-{digest}"


class SingleInstance(QObject):
    """``acquire()`` in the first app; ``activated`` fires when a later launch asks for it."""

    activated = Signal()

    def __init__(self, data_folder: Path, parent=None):
        super().__init__(parent)
        self.key = instance_key(data_folder)
        # The lock lives in the temp folder, not the data folder: that one may be read-only.
        self.lock = QLockFile(str(Path(tempfile.gettempdir()) / f"{self.key}.lock"))
        self.lock.setStaleLockTime(0)  # never steal a live holder's lock because it is old
        self.server: QLocalServer | None = None

    def acquire(self) -> bool:
        """True: this is the only instance (now listening). False: another one runs."""
        if not self.lock.tryLock(0):
            if self.lock.error() == QLockFile.LockFailedError:
                return False
            return True  # the temp folder is unusable: run rather than refuse to start
        QLocalServer.removeServer(self.key)  # a socket left by a killed holder
        self.server = QLocalServer(self)
        self.server.newConnection.connect(self._connected)
        self.server.listen(self.key)
        return True

    def _connected(self) -> None:
        while self.server.hasPendingConnections():
            socket = self.server.nextPendingConnection()
            socket.setParent(self)
            socket.readyRead.connect(lambda s=socket: self._read(s))
            socket.disconnected.connect(socket.deleteLater)
            if socket.bytesAvailable():
                self._read(socket)

    def _read(self, socket: QLocalSocket) -> None:
        if ACTIVATE.strip() in bytes(socket.readAll().data()):
            self.activated.emit()

    def holder_pid(self) -> int | None:
        ok, pid, _host, _app = self.lock.getLockInfo()
        return pid if ok else None

    def ask_running_instance(self) -> bool:
        """Ask the instance holding the lock to come forward; True once it has the message."""
        deadline = time.monotonic() + CONNECT_TRIES_S
        while True:
            socket = QLocalSocket()
            socket.connectToServer(self.key)
            if socket.waitForConnected(1000):
                socket.write(ACTIVATE)
                sent = socket.waitForBytesWritten(2000)
                socket.disconnectFromServer()
                return sent
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def release(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None
        self.lock.unlock()


def bring_forward(window) -> None:
    """Show ``window`` on top, restored if it was minimised."""
    from PySide6.QtCore import Qt

    window.setWindowState((window.windowState() & ~Qt.WindowMinimized) | Qt.WindowActive)
    window.show()
    window.raise_()
    window.activateWindow()
