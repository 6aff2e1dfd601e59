"""Loading bittensor wallets without ever hanging on a password prompt.

Passwords come from ``BT_WALLET_PASSWORD`` or from the file named by
``BT_WALLET_PASSWORD_FILE``; never from a flag. A locked key with no password and no terminal
to ask on is a clear error instead of a process blocked on stdin forever.

Keys are unlocked once, at load. The SDK's signing path (``bittensor.wallets.signing_keypair``)
calls ``wallet.get_hotkey()`` with no password for every hotkey extrinsic, which re-reads the
encrypted keyfile and prompts (it knows only its own per-keyfile ``BT_PW_...`` variable): with no
terminal that is an ``EOFError`` at the first ``set_weights``. The wallet returned here keeps the
unlocked keypairs, so later calls without a password get them instead of a prompt.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import bittensor as bt
from bittensor.sp_core import KeyfileError, Keypair

from ..config import WalletConfig
from .errors import WalletError

PASSWORD_ENV = "BT_WALLET_PASSWORD"
PASSWORD_FILE_ENV = "BT_WALLET_PASSWORD_FILE"


def wallet_password() -> str | None:
    """The wallet password from the environment or its file, if either is set."""
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    path = os.environ.get(PASSWORD_FILE_ENV)
    if path:
        try:
            return Path(path).expanduser().read_text().rstrip("\n")
        except OSError as error:
            raise WalletError(f"{PASSWORD_FILE_ENV}={path} cannot be read: {error}") from None
    return None


class UnlockedWallet(bt.Wallet):
    """A ``bt.Wallet`` whose keys, once unlocked, stay unlocked for password-less calls."""

    def get_hotkey(self, password: str | None = None) -> Keypair:
        """The unlocked hotkey; reads (and decrypts, seconds of key derivation) the keyfile
        only the first time, whatever password later callers pass."""
        if self._hotkey is not None:
            return self._hotkey
        return super().get_hotkey(password)

    def get_coldkey(self, password: str | None = None) -> Keypair:
        """The unlocked coldkey; reads (and decrypts) the keyfile only the first time."""
        if self._coldkey is not None:
            return self._coldkey
        return super().get_coldkey(password)


def load_wallet(cfg: WalletConfig, *, coldkey: bool = False) -> bt.Wallet:
    """Open a wallet and unlock its hotkey (and its coldkey when ``coldkey``)."""
    wallet = UnlockedWallet(cfg.name, cfg.hotkey, path=str(Path(cfg.path).expanduser()))
    hotkey_file = wallet.hotkey_file
    if not hotkey_file.exists_on_device():
        raise WalletError(
            f"no hotkey {cfg.hotkey!r} in wallet {cfg.name!r} at {cfg.path} "
            f"({hotkey_file.path} is missing){_what_is_there(cfg)}; create it with "
            "`btcli wallet new-hotkey` or fix --wallet.name / --wallet.hotkey / --wallet.path"
        )
    _unlock(hotkey_file, wallet.get_hotkey, "hotkey")
    if coldkey:
        if not wallet.coldkey_file.exists_on_device():
            raise WalletError(f"wallet {cfg.name!r} has no coldkey at {wallet.coldkey_file.path}")
        _unlock(wallet.coldkey_file, wallet.get_coldkey, "coldkey")
    return wallet


def _what_is_there(cfg: WalletConfig) -> str:
    """``"; wallets there: a, b"`` when the wallet is missing, ``"; its hotkeys: x"`` when only
    the hotkey is: the names a misspelled flag meant."""
    root = Path(cfg.path).expanduser()
    folder = root / cfg.name / "hotkeys"
    if folder.is_dir():
        # each hotkey file has a public-key twin (``<name>pub.txt``), not a hotkey of its own
        names = sorted(
            p.name for p in folder.iterdir() if p.is_file() and not p.name.endswith("pub.txt")
        )
        return f"; its hotkeys: {', '.join(names) or 'none'}"
    names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    return f"; wallets there: {', '.join(names) or 'none'}"


def _unlock(keyfile, getter, what: str) -> None:
    password = wallet_password() if keyfile.is_encrypted() else None
    if keyfile.is_encrypted() and password is None and not sys.stdin.isatty():
        raise WalletError(
            f"the {what} at {keyfile.path} is encrypted and no terminal can ask for its "
            f"password; set {PASSWORD_ENV} or {PASSWORD_FILE_ENV}"
        )
    try:
        getter(password)
    except KeyfileError as error:
        raise WalletError(f"cannot unlock the {what} at {keyfile.path}: {error}") from None
