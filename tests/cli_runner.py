"""``faceweave`` run as a user runs it, in a subprocess with this checkout on its path.
Importable as ``cli_runner``: tests/ is on sys.path under pytest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m faceweave ARGS`` in ``cwd``, its output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "faceweave", *map(str, args)],
        cwd=cwd,
        env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
