"""A reader per hotkey from the metagraph's commitments, read over real HTTP."""

from __future__ import annotations

import pytest

from subnet.storage.commitment import ReadSettings, encode_commitment
from subnet.storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
from subnet.storage.memory import MemoryStore
from subnet.storage.readers import ReaderPool, build_readers


def _commitment(endpoint: str | None, bucket: str) -> str:
    return encode_commitment(
        ReadSettings(
            bucket, endpoint, "us-east-1", "", DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY
        )
    )


def test_readers_read_each_hotkeys_bucket(moto_server, make_store) -> None:
    make_store(bucket="miner-a").put("k", b"from a")
    make_store(bucket="miner-b").put("k", b"from b")
    pool = build_readers(
        {
            "hk-a": _commitment(moto_server.endpoint_url, "miner-a"),
            "hk-b": _commitment(moto_server.endpoint_url, "miner-b"),
            "hk-c": "",  # registered, nothing committed yet
            "hk-d": "garbage",
        },
        allow_private_endpoints=True,
    )
    assert pool.hotkeys() == ["hk-a", "hk-b"]
    assert pool.get("hk-a").get("k", 100) == b"from a"
    assert pool.get("hk-b").get("k", 100) == b"from b"
    assert pool.get("hk-c") is None and pool.get("hk-d") is None
    assert set(pool.invalid) == {"hk-d"}


@pytest.mark.parametrize(
    "endpoint",
    [
        "http://127.0.0.1:9000",
        "http://169.254.169.254",
        "http://10.0.0.5",
        "http://localhost:1",
        "http://[::1]:80",
    ],
)
def test_private_endpoints_are_refused_by_default(endpoint: str) -> None:
    pool = build_readers({"hk": _commitment(endpoint, "bucket")})
    assert "hk" not in pool and pool.get("hk") is None
    assert "endpoint" in pool.invalid["hk"]


def test_clients_are_reused_until_the_commitment_changes() -> None:
    built: list[ReadSettings] = []

    def factory(settings: ReadSettings) -> MemoryStore:
        built.append(settings)
        return MemoryStore(settings.bucket)

    pool = ReaderPool(factory=factory)
    pool.update({"hk": _commitment(None, "bucket-one")})
    first = pool.get("hk")
    pool.update({"hk": _commitment(None, "bucket-one")})
    assert pool.get("hk") is first and len(built) == 1
    pool.update({"hk": _commitment(None, "bucket-two")})
    assert pool.get("hk") is not first and pool.settings("hk").bucket == "bucket-two"
    pool.update({})
    assert pool.get("hk") is None and len(pool) == 0


def test_a_name_that_resolves_to_a_private_address_is_refused(monkeypatch) -> None:
    import socket

    answers = {"meta.example": "169.254.169.254", "public.example": "93.184.216.34"}

    def fake_getaddrinfo(host, *args, **kwargs):
        if host not in answers:
            raise socket.gaierror("no such name")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], 0))]

    monkeypatch.setattr(socket, "getaddrinfo", fake_getaddrinfo)
    pool = build_readers({
        "evil": _commitment("http://meta.example:80", "bucket"),
        "gone": _commitment("https://nowhere.example", "bucket"),
        "good": _commitment("https://public.example", "bucket"),
    })  # fmt: skip
    assert "169.254.169.254" in pool.invalid["evil"] and "does not resolve" in pool.invalid["gone"]
    assert "good" in pool and "good" not in pool.invalid
