"""Key presses from the terminal a live session runs in.

A session whose output has no window of its own (a virtual camera for OBS, a stream,
a recording) had no way to switch the source, change the fusion or turn the swap off
while it ran: those keys existed only in the preview window. :func:`open_terminal_keys`
reads single key presses from the terminal instead (no Enter needed, not echoed) and
hands each to ``on_key`` from a thread; :meth:`TerminalKeys.close` puts the terminal
back as it was. Ctrl-C still interrupts: only line buffering and echo are turned off.

Example:
    >>> keys = open_terminal_keys(controls.on_key)  # doctest: +SKIP
    >>> try:
    ...     run_session()
    ... finally:
    ...     if keys is not None:
    ...         keys.close()
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import threading
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["TerminalKeys", "open_terminal_keys"]


class TerminalKeys:
    """Single key presses from the terminal ``fd``, each handed to ``on_key``.

    The terminal is put in cbreak mode (keys arrive as typed, without echo; signals
    such as Ctrl-C still work) until :meth:`close`, which restores its settings.
    """

    def __init__(self, fd: int, on_key: Callable[[str], None]) -> None:
        import termios
        import tty

        self.fd = fd
        self.on_key = on_key
        self._saved: list[Any] = termios.tcgetattr(fd)
        tty.setcbreak(fd, termios.TCSANOW)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faceweave-keys", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if not ready:
                    continue
                data = os.read(self.fd, 64)
            except OSError:  # the terminal went away (closed, hung up)
                return
            if not data:
                return
            for key in data.decode("utf-8", errors="ignore"):
                self.on_key(key)

    def close(self) -> None:
        """Stop reading and restore the terminal. Safe to call twice."""
        import termios

        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(1.0)
        with contextlib.suppress(OSError, termios.error):
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)


def open_terminal_keys(
    on_key: Callable[[str], None], stream: TextIO | None = None
) -> TerminalKeys | None:
    """Read key presses from ``stream`` (stdin) when it is a terminal this process has
    in the foreground; None otherwise: a pipe or ``/dev/null`` (a script, a service),
    a background job (reading its terminal would stop it: SIGTTIN), or no POSIX
    terminal API (Windows)."""
    stream = sys.stdin if stream is None else stream
    try:
        import termios
    except ImportError:
        return None
    try:
        fd = stream.fileno()
        if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
            return None
        return TerminalKeys(fd, on_key)
    except (AttributeError, ValueError, OSError, termios.error):
        return None
