"""Key presses from the terminal: a live session with no window of its own (a virtual
camera, a stream, a recording) takes n, +, -, e and q there."""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from clips import make_clip  # tests/clips.py: tests/ is on sys.path under pytest

from faceweave.io.image import write_image
from faceweave.io.keys import TerminalKeys, open_terminal_keys

termios = pytest.importorskip("termios")
pty = pytest.importorskip("pty")

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_keys_arrive_one_by_one_and_the_terminal_is_restored() -> None:
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        keys: list[str] = []
        reader = TerminalKeys(slave, keys.append)
        during = termios.tcgetattr(slave)
        assert not during[3] & termios.ICANON and not during[3] & termios.ECHO
        assert during[3] & termios.ISIG  # Ctrl-C still interrupts
        os.write(master, b"n+-eq")  # no Enter: cbreak mode hands each key at once
        deadline = time.monotonic() + 5.0
        while len(keys) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        reader.close()
        reader.close()  # twice is safe
        assert keys == ["n", "+", "-", "e", "q"]
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)


def test_no_terminal_no_keys(tmp_path: Path) -> None:
    """A pipe or /dev/null (a script, a service) is not read."""
    with open(os.devnull) as null:
        assert open_terminal_keys(print, null) is None
    read_end, write_end = os.pipe()
    try:
        with os.fdopen(read_end, closefd=False) as pipe:
            assert open_terminal_keys(print, pipe) is None
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_recording_session_takes_its_keys_from_the_terminal(
    tmp_path: Path, astronaut: np.ndarray, grace_hopper: np.ndarray
) -> None:
    """``live -o FILE`` in a terminal: it says its keys and ``q`` ends it as Ctrl-C
    does, the recording kept (only a window had keys before)."""
    clip = make_clip(tmp_path / "cam.mp4", astronaut, frames=60, size=(320, 240), audio=False)
    source = tmp_path / "me.png"
    write_image(source, grace_hopper)
    stats, output = tmp_path / "stats.json", tmp_path / "out.mkv"
    argv = [sys.executable, "-m", "faceweave", "live", "--source", str(source)]
    argv += ["--input", str(clip), "--loop", "-o", str(output), "--stats", str(stats)]
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    env.pop("FACEWEAVE_DEBUG", None)
    pid, fd = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal, in the foreground
        os.chdir(tmp_path)
        os.execve(sys.executable, argv, env)
    seen = b""
    try:
        deadline = time.monotonic() + 120.0
        while b"keys: n next source" not in seen and time.monotonic() < deadline:
            if select.select([fd], [], [], 0.5)[0]:
                seen += os.read(fd, 4096)
        assert b"keys: n next source (of 1)" in seen, seen
        time.sleep(1.0)
        os.write(fd, b"q")
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.2)[0]:
                try:
                    seen += os.read(fd, 4096)
                except OSError:
                    pass
        else:
            os.kill(pid, 9)
            raise AssertionError(f"the session did not end on q: {seen!r}")
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen
    assert json.loads(stats.read_text())["stopped_by"] == "quit"
    assert output.exists()
