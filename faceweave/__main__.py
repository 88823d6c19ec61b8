"""``python -m faceweave``: the same as the ``faceweave`` command."""

from faceweave.apps.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
