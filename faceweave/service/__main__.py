"""``python -m faceweave.service --data DIR --port 8000``: run the service."""

import sys

from faceweave.apps.service_cli import serve_main

if __name__ == "__main__":
    sys.exit(serve_main())
