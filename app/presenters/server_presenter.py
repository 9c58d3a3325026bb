"""What the Server panel shows and does: it starts and stops ``local_server``'s child with
the model the person chose (the chat's by default), keeps its key as a server's key is kept
(``server_keys``), stops it when the chat's model changes (offering a restart) and when
the app quits."""

from __future__ import annotations

import socket
from dataclasses import replace

from PySide6.QtCore import QObject

from ..storage.downloads import installed_models
from ..views.server_panel import CHATS_MODEL, ServerPanel
from .local_server import FAILED, RUNNING, STOPPED, STOPPING, LocalServer

KEY_ACCOUNT = "this machine's server"  # the keychain entry of the key the panel sets


class ServerPresenter(QObject):
    def __init__(self, window, controller, panel: ServerPanel, server: LocalServer | None = None):
        super().__init__(window)
        self.window = window
        self.models = controller.models
        self.panel = panel
        self.server = server or LocalServer(self)
        self.served_chats_model = ""  # the chat's model path the running server serves
        self.restart_offer = ""  # why it stopped, said once it has
        panel.network.toggled.connect(self.fill_key)
        panel.startRequested.connect(self.start)
        panel.stopRequested.connect(self.server.stop)
        panel.restartRequested.connect(self.restart)
        panel.copied.connect(lambda _: window.statusBar().showMessage("Copied", 2000))
        self.server.stateChanged.connect(self.state_changed)
        self.server.logged.connect(panel.add_log)
        self.models.modelChanged.connect(self.model_changed)
        self.list_models()

    def fill_key(self, on_network: bool) -> None:
        """The key kept from last time, read when first needed: the keychain is not
        touched (nor, on a Mac, its permission asked) at every start of the app."""
        if on_network and not self.panel.key.text():
            self.panel.set_key(self.models.server_keys.get(KEY_ACCOUNT))

    def chats_model(self) -> str:
        """The model the chat answers with, as the server loads it: its folder when this
        machine's engine has it, else the name the chat asked a server for."""
        if self.models.server_url:
            return self.models.settings().model or ""
        return self.models.model_path

    def list_models(self) -> None:
        others = [(m.label, str(m.path)) for m in installed_models() if m.complete]
        self.panel.set_models(self.models.model_name, others)

    def start(self, launch) -> bool:
        follows_chat = launch.model == CHATS_MODEL
        if follows_chat:
            launch = replace(launch, model=self.chats_model() or None)
        self.served_chats_model = (launch.model or "") if follows_chat else ""
        if launch.api_key:
            self.models.server_keys.set(KEY_ACCOUNT, launch.api_key)
        return self.server.start(launch)

    def restart(self) -> None:
        self.panel.model.setCurrentIndex(0)  # the chat's model
        self.panel.start_button.click()

    def model_changed(self, name: str, path: str, speculation: str) -> None:
        """A server serving the chat's model stops when the chat's model changes, and
        offers to start again with the new one."""
        self.list_models()
        if not (self.server.active and self.served_chats_model):
            return
        if self.chats_model() == self.served_chats_model:
            return
        self.restart_offer = (
            f"Stopped: the chat's model is now {name}, and the server served the one "
            "before. Restart to serve the new one."
        )
        self.server.stop()

    def state_changed(self, state: str, detail: str) -> None:
        self.panel.show_state(state, detail)
        if state == STOPPED and self.restart_offer:
            self.panel.offer_restart(self.restart_offer)
        if state != STOPPING:
            self.restart_offer = ""
        if state == RUNNING:
            launch = self.server.launch
            elsewhere = f"http://{socket.gethostname()}:{launch.port}" if launch.on_network else ""
            model = self.server.model_name or self.models.model_name
            self.panel.show_running(detail, model, bool(launch.api_key), elsewhere)
        if state == FAILED:
            self.window.statusBar().showMessage("The server failed: see the Server panel", 5000)

    def shutdown(self) -> None:
        self.server.shutdown()
