"""`python -m mjfast`: the same command line as the `mjfast` script (mjfast.cli)."""

from __future__ import annotations

import sys

from mjfast.cli import main

if __name__ == "__main__":
    sys.exit(main())
