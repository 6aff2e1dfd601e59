"""Logging through loguru, with the bittensor SDK's standard-library loggers routed into it.

The SDK logs under the ``bittensor.*`` standard-library namespace and never configures
handlers; :func:`setup_logging` installs one handler there that forwards every record to
loguru, so a node has one log stream with one format and one level switch.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from loguru import logger

_FORMAT = "{time:HH:mm:ss.SSS} | {level: <7} | {extra[node]} | {message}"


class _ToLoguru(logging.Handler):
    """Forward standard-library records to loguru, keeping level and origin."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        logger.opt(depth=6, exception=record.exc_info).log(level, record.getMessage())


def setup_logging(
    *, debug: bool = False, trace: bool = False, log_dir: str | None = None, node: str = "beam"
) -> None:
    """Configure loguru for a process: stderr, optionally a rotating file, SDK logs included."""
    level = "TRACE" if trace else "DEBUG" if debug else "INFO"
    logger.remove()
    logger.configure(extra={"node": node})
    # diagnose=False: a traceback never prints local variables (a page of them buried the one
    # line that mattered, and a local may hold a secret).
    logger.add(
        sys.stderr, level=level, format=_FORMAT, colorize=sys.stderr.isatty(), diagnose=False
    )
    if log_dir:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        logger.add(
            Path(log_dir) / f"{node}.log",
            level=level,
            format=_FORMAT,
            rotation="50 MB",
            diagnose=False,
        )
    sdk = logging.getLogger("bittensor")
    sdk.handlers = [h for h in sdk.handlers if not isinstance(h, _ToLoguru)]
    sdk.addHandler(_ToLoguru())
    sdk.setLevel(logging.DEBUG if (debug or trace) else logging.INFO)
    sdk.propagate = False
