"""``python -m faceweave`` and the ``faceweave`` command.

A light launcher: it loads the command line (numpy, OpenCV, MediaPipe; about half a
second) under its own Ctrl-C handling, so that an interrupt while the program starts
ends it with one line and exit code 130, as one while it works does, not a traceback.
"""

from __future__ import annotations

import sys

from faceweave.errors import EXIT_INTERRUPTED


def main(argv: list[str] | None = None) -> int:
    """Load the command line and run it; see :func:`faceweave.apps.cli.main`."""
    try:
        from faceweave.apps.cli import main as cli_main

        return cli_main(argv)
    except KeyboardInterrupt:  # while loading, or in the instant before the command's own handling
        print("faceweave: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
