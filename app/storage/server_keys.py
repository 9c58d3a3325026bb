"""API keys of Draftless servers: in the system keychain, never in the settings file.

The keychain is reached through the ``keyring`` package (macOS Keychain, Secret Service,
Windows Credential Locker). Where it is not installed, or has no usable backend (a
headless Linux session), keys are kept in memory for this session only, and
``persistent`` says so, for the connect dialog to tell the person.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)
SERVICE = "Draftless server"  # the keychain entry's service name; the account is the address


def system_keyring():
    """The ``keyring`` module when it has a usable backend, else None."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:
        return None
    try:
        backend = keyring.get_keyring()
        if isinstance(backend, fail.Keyring) or float(getattr(backend, "priority", 0)) <= 0:
            return None
    except Exception:  # a broken backend configuration is no keychain
        log.warning("the system keychain is not usable", exc_info=True)
        return None
    return keyring


class ServerKeys:
    """Keys by server address (``api_base`` form)."""

    def __init__(self, backend=...):
        self._backend = backend  # ...: the system's, looked up at first use
        self._session: dict[str, str] = {}

    @property
    def backend(self):
        if self._backend is ...:
            self._backend = system_keyring()
        return self._backend

    @property
    def persistent(self) -> bool:
        return self.backend is not None

    def get(self, url: str) -> str | None:
        if url in self._session:
            return self._session[url]
        if self.backend is None:
            return None
        try:
            return self.backend.get_password(SERVICE, url)
        except Exception:
            log.warning("could not read a key from the system keychain", exc_info=True)
            return None

    def set(self, url: str, key: str | None) -> bool:
        """Keep ``key`` for ``url`` (None or empty: forget it). True when it is in the
        keychain; False when it is kept for this session only."""
        if key:
            self._session[url] = key
        else:
            self._session.pop(url, None)
        if self.backend is None:
            return False
        try:
            if key:
                self.backend.set_password(SERVICE, url, key)
            elif self.backend.get_password(SERVICE, url) is not None:
                self.backend.delete_password(SERVICE, url)
            return True
        except Exception:
            log.warning("could not write the key to the system keychain", exc_info=True)
            return False
