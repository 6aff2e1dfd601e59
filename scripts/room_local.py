"""A local place for rooms: an S3 server, one bucket and one dev wallet per name, until Ctrl-C.

    python scripts/room_local.py --names owner,alice,bob          # S3 on http://127.0.0.1:8340

Buckets are ``beam-<name>``; unencrypted development wallets (never fund them) go to
``--root``/wallets. It prints the environment the room CLI and the neurons need. See
docs/rooms.md, which walks through a room on exactly this.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from subnet.localnet.wallets import dev_wallet
from subnet.storage.config import StorageConfig
from subnet.storage.local_server import DUMMY_ACCESS_KEY_ID, DUMMY_SECRET_ACCESS_KEY, MotoServer
from subnet.storage.s3 import S3Store


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", default="owner,alice,bob", help="comma-separated member names")
    parser.add_argument("--root", default=".beam/room", help="wallets and the server's log")
    parser.add_argument(
        "--port",
        type=int,
        default=8340,
        help="S3 server port on 127.0.0.1 (not 5000: macOS AirPlay takes it)",
    )
    args = parser.parse_args()
    root = Path(args.root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    server = MotoServer(port=args.port, log_path=root / "s3.log")
    try:
        server.start()
    except Exception as error:  # a taken port, most often
        print(f"error: the S3 server did not start on port {args.port} ({error}); "
              "pick another with --port", file=sys.stderr)  # fmt: skip
        return 2
    keys = {"BEAM_S3_ACCESS_KEY_ID": DUMMY_ACCESS_KEY_ID,
            "BEAM_S3_SECRET_ACCESS_KEY": DUMMY_SECRET_ACCESS_KEY}  # fmt: skip
    for name in [n.strip() for n in args.names.split(",") if n.strip()]:
        hotkey = dev_wallet(root / "wallets", name).hotkey.ss58_address
        config = StorageConfig(bucket=f"beam-{name}", endpoint_url=server.endpoint_url,
                               addressing_style="path")  # fmt: skip
        S3Store.from_config(config, keys).ensure_bucket()
        print(f"{name:>8}: hotkey {hotkey}, bucket beam-{name}")
    print(f"\nS3 server at {server.endpoint_url} (Ctrl-C stops it). Environment for the room CLI "
          f"and the neurons:\n\n"
          f"export BEAM_S3_ACCESS_KEY_ID={DUMMY_ACCESS_KEY_ID} "
          f"BEAM_S3_SECRET_ACCESS_KEY={DUMMY_SECRET_ACCESS_KEY}\n"
          f"export BEAM_S3_READ_ACCESS_KEY_ID={DUMMY_ACCESS_KEY_ID} "
          f"BEAM_S3_READ_SECRET_ACCESS_KEY={DUMMY_SECRET_ACCESS_KEY}\n"
          f"export BEAM_WALLET_PATH={root / 'wallets'} "
          f"BEAM_STORAGE_ENDPOINT_URL={server.endpoint_url} BEAM_STORAGE_ADDRESSING_STYLE=path",
          flush=True)  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
