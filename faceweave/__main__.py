"""``python -m faceweave`` and the ``faceweave`` command.

A light launcher: it loads the command line (numpy, OpenCV, MediaPipe; about half a
second) with Ctrl-C held back, and then ends with one line and exit code 130, as an
interrupt while the command works does, not with a traceback. (Raised inside an
import, the interrupt could also surface as another library's ImportError.)
"""

from __future__ import annotations

import sys

from faceweave.errors import EXIT_INTERRUPTED
from faceweave.runtime import signals_deferred


def main(argv: list[str] | None = None) -> int:
    """Load the command line and run it; see :func:`faceweave.apps.cli.main`."""
    try:
        with signals_deferred():
            from faceweave.apps.cli import main as cli_main
        return cli_main(argv)
    except KeyboardInterrupt:  # while loading, or in the instant before the command's own
        print("faceweave: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(main())
