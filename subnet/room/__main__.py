"""``python -m subnet.room``: see :mod:`subnet.room.cli`."""

import sys

from subnet.room.cli import main

if __name__ == "__main__":
    sys.exit(main())
