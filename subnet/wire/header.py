"""The signed header of an envelope, what a reader expects of it, and who can sign one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from subnet.storage.keys import LANE_PATTERN, PROTOCOL_VERSION, ObjectKind, lane_of

PLAN_PATTERN = r"^[0-9a-f]{16}$"  # ``subnet.topology.plan.plan_digest``
MAX_SLOT = 10**12 - 1  # the key layout's 12-digit window slot bounds every number in a header


class Signer(Protocol):
    """Anything that signs as a hotkey: a bittensor `Keypair` (`wallet.hotkey`) fits."""

    @property
    def ss58_address(self) -> str:
        """The hotkey's ss58 address, the identity readers verify against."""
        ...

    def sign(self, message: bytes) -> bytes:
        """A 64-byte sr25519 signature of `message`."""
        ...


class Header(BaseModel):
    """Identifies an envelope's payload and binds it, by digest, to the signature."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    version: int = Field(ge=0, le=MAX_SLOT)  # protocol version (`keys.PROTOCOL_VERSION`)
    run: str = Field(min_length=1, max_length=64)
    kind: ObjectKind
    lane: str = Field(pattern=LANE_PATTERN)  # the run plan's stream, as in the key
    window: int = Field(ge=0, le=MAX_SLOT)  # window, round, or shard index, as in the key
    sender: str = Field(min_length=40, max_length=60)  # ss58 hotkey of the signer
    # model version the payload applies to
    base_version: int | None = Field(default=None, ge=0, le=MAX_SLOT)
    # the run plan's digest, for objects made under a plan (``RunPlan.digest``); None for the
    # others (model versions, commits: the reveal carries it)
    plan: str | None = Field(default=None, pattern=PLAN_PATTERN)
    payload_bytes: int = Field(ge=0, le=MAX_SLOT)
    payload_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class Expected:
    """What the reader knows before opening an envelope: its key and the bucket's owner.

    `base_version=None` accepts any base model version (for kinds that have none);
    `lane=None` means the kind's default lane (`subnet.storage.keys.DEFAULT_LANES`);
    `plan=None` accepts any plan (or none), a digest requires exactly that one.
    """

    run: str
    window: int
    kind: ObjectKind
    sender: str
    base_version: int | None = None
    version: int = PROTOCOL_VERSION
    lane: str | None = None
    plan: str | None = None

    @property
    def lane_name(self) -> str:
        """The lane the object must travel on."""
        return lane_of(self.kind, self.lane)
