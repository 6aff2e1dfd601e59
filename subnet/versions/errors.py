"""Why publishing or syncing a model version failed: one stable reason code per failure.

Reason codes are strings so that wrapped causes keep their own code: `rejected:<wire reason>` for
an envelope that failed `subnet.wire` checks, `patch:<patch reason>` for a patch that did not apply,
`storage:<storage reason>` for an outage.
"""

from __future__ import annotations

# SyncError reasons (prefixes end in ":"):
SYNC_REASONS = (
    "not_published",  # the holder has no manifest yet
    "missing_version",  # a patch, checkpoint or manifest the latest manifest relies on is absent
    "digest_mismatch",  # the synced state does not hash to the manifest's digest
    "rollback",  # a version already seen or held locally is gone (the holder started over)
    "bad_manifest",  # a verified manifest whose content contradicts its header or the key layout
    "no_reader",  # no valid storage commitment for the holder's hotkey
    "rejected:",  # + a `subnet.wire.Reason` value
    "patch:",  # + a `subnet.compression.patch.PatchRejectReason`, or `corrupt` (a bad stream)
    "delta:",  # + a `subnet.compression.RejectReason` of the delta's codec, or `state_mismatch`
    "storage:",  # + a `subnet.storage.StorageReason`
)

# PublishError reasons:
PUBLISH_REASONS = (
    "window_not_after_latest",  # windows must increase from one version to the next
    "state_mismatch",  # tensor names, shapes or dtypes differ from the previous version
    "conflict",  # the version is already committed with another payload (a second holder?)
    "resume:",  # + the SyncError reason met while reloading the latest published state
)


class SyncError(Exception):
    """Syncing to the holder's latest version failed; `reason` is a code from `SYNC_REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class PublishError(Exception):
    """Publishing a model version failed; `reason` is a code from `PUBLISH_REASONS`."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)
