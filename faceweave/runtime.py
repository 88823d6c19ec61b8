"""Process-wide settings that make per-frame work cheaper.

Every frame allocates a few megabytes of fresh arrays (the output frame, crops,
float copies). With glibc's default allocator those large blocks come straight
from the kernel (``mmap``) and go back on ``free``, so each new frame pays a page
fault for every 4 KiB it touches: about a million faults a minute at 720p, 1 to 3
ms of each swap. :func:`tune_allocator` keeps such blocks in the heap and the freed
memory in the process, so the next frame reuses it.

faceweave's own programs (``faceweave`` and its service) call it at start; a
program that imports the library decides for itself. It changes the whole
process: freed memory up to ``trim_mib`` stays with the process instead of going
back to the system, and it does nothing on platforms without glibc.

Example:
    >>> import faceweave as fw
    >>> fw.tune_allocator()  # doctest: +SKIP
    True
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from faceweave.errors import UsageError

__all__ = [
    "STOP_SIGNALS",
    "StopSignal",
    "handling_signals",
    "release_heap",
    "signals_deferred",
    "tune_allocator",
]

# Signals that ask a program to end (``timeout``, ``docker stop``, systemd, a closed
# terminal), beside Ctrl-C's SIGINT; SIGHUP does not exist on Windows.
STOP_SIGNALS: tuple[int, ...] = tuple(
    getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP (``timeout``, ``docker stop``, systemd, a closed terminal),
    raised in the main thread as Ctrl-C is, so the same clean-up runs: no temporary
    file is left behind, a video written so far is closed. ``signum`` says which (a
    program exits with 128 + it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_applied = False


def tune_allocator(*, mmap_mib: int = 32, trim_mib: int = 256) -> bool:
    """Keep large, short-lived frame buffers in the heap (glibc only).

    Args:
        mmap_mib: blocks below this size come from the heap, not from ``mmap``
            (glibc accepts at most 32 on 64-bit systems: a 1080p BGR frame is 6).
        trim_mib: free memory at the top of the heap is returned to the system only
            above this size.

    Returns:
        True when the allocator took the settings (Linux with glibc), else False.
    """
    global _applied
    for setting, value in (("mmap_mib", mmap_mib), ("trim_mib", trim_mib)):
        # (In bytes it must fit a C int.)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2047:
            raise UsageError(
                f"{setting} must be a whole number of MiB from 0 to 2047, got {value!r}"
            )
    if _applied:
        return True
    mallopt = _glibc("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, mmap_mib << 20)) and bool(
        mallopt(_M_TRIM_THRESHOLD, trim_mib << 20)
    )
    _applied = ok
    return ok


def _glibc(function: str) -> Any:
    """The C library's ``function`` on Linux, or None (musl and others have no
    ``mallopt`` or ``malloc_trim``; other systems, other allocators)."""
    if not sys.platform.startswith("linux"):
        return None
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), function)
    except (OSError, AttributeError):
        return None


def release_heap() -> bool:
    """Give the heap's free memory back to the system (glibc's ``malloc_trim``): after
    a burst of large, short-lived buffers (a server's checks of big uploads) the
    process would otherwise keep them. True when the allocator did it."""
    trim = _glibc("malloc_trim")
    if trim is None:
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True


@contextlib.contextmanager
def handling_signals(
    signals: tuple[int, ...], handler: Callable[[int, Any], None]
) -> Iterator[bool]:
    """Call ``handler(signum, frame)`` for ``signals`` inside the block, and put the
    previous handlers back after it. Python sets handlers in the main thread only:
    elsewhere nothing changes. Yields whether the handler was installed."""
    if threading.current_thread() is not threading.main_thread():
        yield False
        return
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield True
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


@contextlib.contextmanager
def signals_deferred(
    signals: tuple[int, ...] = (signal.SIGINT, *STOP_SIGNALS),
) -> Iterator[None]:
    """Hold Ctrl-C and the stop signals back inside the block and deliver the first one
    after it, to the handler then in place.

    For the imports of native modules: an interrupt raised inside one (numpy's, a
    pybind11 module's "initialization failed") surfaces as that library's ImportError,
    which reads as a broken install. In the main thread only; elsewhere nothing
    changes.
    """
    pressed: list[int] = []
    with handling_signals(signals, lambda signum, frame: pressed.append(signum)):
        yield
    if pressed:
        signal.raise_signal(pressed[0])
