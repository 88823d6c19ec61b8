"""faceweave.runtime: the allocator setting the programs apply at start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from faceweave.runtime import signals_deferred


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tune_allocator_keeps_frame_buffers_in_the_heap() -> None:
    # In a fresh process, a frame's worth of working buffers (three 5 MB arrays alive
    # at once, as in a swap) allocated and freed 30 times: by default glibc gives the
    # freed heap top back to the system each time and faults it in again; tuned, once.
    script = textwrap.dedent(
        """
        import resource, sys
        import numpy as np
        if sys.argv[1] == "tuned":
            from faceweave.runtime import tune_allocator
            assert tune_allocator() is True
            assert tune_allocator() is True  # idempotent
        def faults():
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        frame = np.ones((1080, 1920, 3), np.uint8)
        del frame  # glibc raises its mmap threshold to 6 MB
        before = faults()
        for _ in range(30):
            buffers = [np.ones((5 << 20,), np.uint8) for _ in range(3)]
            del buffers
        print(faults() - before)
        """
    )
    counts = {
        mode: int(
            subprocess.run(
                [sys.executable, "-c", script, mode], capture_output=True, text=True, check=True
            ).stdout
        )
        for mode in ("default", "tuned")
    }
    assert counts["tuned"] * 5 < counts["default"], counts


def test_signals_deferred_delivers_ctrl_c_after_the_block() -> None:
    """An import of a native module sees no interrupt (raised inside one it surfaces as
    that library's ImportError); the program gets it right after."""
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)  # a handler runs between bytecodes: it had its chance
            reached.append("end of block")
    assert reached == ["end of block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_signals_deferred_hands_a_stop_signal_to_the_handler_in_place() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.parametrize(
    ("setting", "value"),
    [("mmap_mib", -1), ("trim_mib", 4096), ("mmap_mib", 1.5), ("trim_mib", True)],
)
def test_tune_allocator_checks_its_sizes(setting: str, value: object) -> None:
    from faceweave.errors import UsageError
    from faceweave.runtime import tune_allocator

    with pytest.raises(UsageError, match=f"{setting} must be a whole number of MiB"):
        tune_allocator(**{setting: value})  # type: ignore[arg-type]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_heap_gives_freed_memory_back() -> None:
    """After a burst of large buffers freed (a server's checks of big uploads), the
    process's resident memory falls back (it had stayed gigabytes high)."""
    script = textwrap.dedent(
        """
        import sys
        from faceweave.runtime import release_heap, tune_allocator
        def rss():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096 >> 20
        tune_allocator()  # (as the server: blocks under 32 MiB stay in the heap)
        base = rss()
        blocks = [bytearray(8 << 20) for _ in range(40)]  # 320 MiB in heap blocks
        del blocks[:-1]  # all but the newest freed: the heap's top is still in use
        held = rss()
        assert release_heap() is True
        print(base, held, rss())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    base, held, after = (int(v) for v in done.stdout.split())
    assert held - base > 250
    assert after - base < 60
