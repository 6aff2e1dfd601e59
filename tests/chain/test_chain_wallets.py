"""Encrypted wallets: unlocked once from the documented variables, never prompting later.

Real encrypted keyfiles, written by the SDK; the later call is the SDK's own signing path for
extrinsics (`bittensor.wallets.signing_keypair`), which used to re-read the keyfile and hit
`EOFError` on the password prompt with no terminal.
"""

from __future__ import annotations

import io
from pathlib import Path

import bittensor as bt
import pytest
from bittensor.wallets import signing_keypair

from subnet.chain.errors import WalletError
from subnet.chain.wallets import PASSWORD_ENV, PASSWORD_FILE_ENV, load_wallet
from subnet.config import WalletConfig

PASSWORD = "correct horse battery staple"


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory: pytest.TempPathFactory) -> WalletConfig:
    """A wallet whose coldkey and hotkey are both encrypted with `PASSWORD` (read-only use:
    encrypting takes seconds, so the module shares one)."""
    tmp_path = tmp_path_factory.mktemp("wallets")
    wallet = bt.Wallet("enc", "hk", path=str(tmp_path))
    wallet.create_new_coldkey(use_password=True, suppress=True, coldkey_password=PASSWORD)
    wallet.create_new_hotkey(use_password=True, suppress=True, hotkey_password=PASSWORD)
    assert wallet.hotkey_file.is_encrypted() and wallet.coldkey_file.is_encrypted()
    return WalletConfig(name="enc", hotkey="hk", path=str(tmp_path))


@pytest.fixture(autouse=True)
def no_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """stdin is not a terminal and has nothing to read: any prompt is an EOFError."""
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_FILE_ENV, raising=False)


@pytest.mark.parametrize("source", ["env", "file"])
def test_encrypted_keys_unlock_once_and_sign_extrinsics_without_a_prompt(
    encrypted: WalletConfig, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, source: str
) -> None:
    if source == "env":
        monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    else:
        secret = tmp_path / "password"
        secret.write_text(PASSWORD + "\n")
        monkeypatch.setenv(PASSWORD_FILE_ENV, str(secret))
    wallet = load_wallet(encrypted, coldkey=source == "env")
    # The variables may be gone by the first extrinsic (a process that scrubs its environment).
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_FILE_ENV, raising=False)
    hotkey = signing_keypair(wallet, "hotkey")
    assert hotkey.ss58_address == wallet.hotkey.ss58_address
    assert hotkey.verify(b"extrinsic", hotkey.sign(b"extrinsic"))
    if source == "env":
        coldkey = signing_keypair(wallet, "coldkey")
        assert coldkey.ss58_address == wallet.coldkeypub.ss58_address


def test_later_calls_never_read_the_keyfile_again(
    encrypted: WalletConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The SDK's `get_hotkey()` re-reads the keyfile and prompts (on /dev/tty when there is one);
    after `load_wallet` nothing may reach the keyfile again."""
    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    wallet = load_wallet(encrypted)

    def prompt(*args: object, **kwargs: object) -> None:
        raise AssertionError("the keyfile was read again (the SDK would prompt here)")

    monkeypatch.setattr(type(wallet.hotkey_file), "get_keypair", prompt)
    assert signing_keypair(wallet, "hotkey") is wallet.hotkey


def test_wrong_password_is_one_clear_error(
    encrypted: WalletConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "wrong")
    with pytest.raises(WalletError, match="cannot unlock the hotkey"):
        load_wallet(encrypted)


def test_no_password_and_no_terminal_is_one_clear_error(encrypted: WalletConfig) -> None:
    with pytest.raises(WalletError, match=PASSWORD_ENV):
        load_wallet(encrypted)
