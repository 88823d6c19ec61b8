"""dlib's identity descriptor from an aligned chip, and in a child process (the live
sessions' identity rechecks)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pytest

from faceweave.analysis import identity_worker
from faceweave.analysis.analyser import FaceAnalyser
from faceweave.analysis.dlib_backend import CHIP_SIZE, DlibIdentity, dlib_alignment
from faceweave.analysis.identity_worker import IdentityWorker
from faceweave.errors import BackendError
from faceweave.types import Face

T = TypeVar("T")


def _identity(analyser: FaceAnalyser) -> DlibIdentity:
    identity = analyser.identity
    assert isinstance(identity, DlibIdentity)
    return identity


def _soon(check: Callable[[], T], seconds: float = 60.0) -> T:
    """``check()`` once it is truthy (the child loads dlib's network first)."""
    end = time.monotonic() + seconds
    while True:
        value = check()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.01)


def test_a_chip_is_described_as_its_frame_is(
    analyser: FaceAnalyser, grace_hopper: np.ndarray, grace_hopper_face: Face
) -> None:
    """The chip, cut from the BGR frame and turned to RGB, is the one dlib cuts from
    the RGB frame: its descriptor is the face's to the last bit."""
    identity = _identity(analyser)
    box, points = dlib_alignment(grace_hopper_face.landmarks_478)
    chip = identity.chip(grace_hopper, box, points)
    assert chip.shape == (CHIP_SIZE, CHIP_SIZE, 3) and chip.dtype == np.uint8
    np.testing.assert_array_equal(identity.embed_chip(chip), grace_hopper_face.embedding)
    # Without points, dlib's own 5-point fit aligns it, as embed() does.
    np.testing.assert_array_equal(
        identity.embed_chip(identity.chip(grace_hopper, box)), identity.embed(grace_hopper, box)
    )
    # Its colours are RGB: the face's skin is redder than it is blue.
    middle = chip[50:100, 40:110].reshape(-1, 3).mean(0)
    assert middle[0] > middle[2] + 10
    with pytest.raises(BackendError, match="face chip"):
        identity.embed_chip(chip[:100])


def test_the_worker_answers_each_face_with_its_descriptor(
    analyser: FaceAnalyser, grace_hopper_face: Face, astronaut_face: Face
) -> None:
    worker = IdentityWorker.start(_identity(analyser))
    assert worker is not None
    with worker:
        assert _soon(lambda: worker.idle)
        assert worker.submit(3, grace_hopper_face)
        # One face at a time: the pipe never fills, a send never waits.
        assert not worker.idle and not worker.submit(4, astronaut_face)
        # Answered (idle again); looking at idle keeps the answer for results().
        assert _soon(lambda: worker.idle)
        answers = worker.results()
        assert [key for key, _ in answers] == [3]
        np.testing.assert_array_equal(answers[0][1], grace_hopper_face.embedding)
        assert worker.idle and worker.submit(4, astronaut_face)
        ((key, descriptor),) = _soon(worker.results)
        assert key == 4
        np.testing.assert_array_equal(descriptor, astronaut_face.embedding)
        assert worker.results() == []
    assert not worker.alive
    assert worker._process.returncode == 0  # its input closed, it ended by itself


def test_a_worker_whose_child_ended_says_so(
    analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """The caller then checks identities itself (FaceRouter does)."""
    worker = IdentityWorker.start(_identity(analyser))
    assert worker is not None
    assert _soon(lambda: worker.idle)
    assert worker.submit(1, grace_hopper_face)
    worker._process.kill()
    assert _soon(lambda: not (worker.results() or worker.alive))
    assert not worker.idle and not worker.submit(2, grace_hopper_face)
    worker.close()  # and closing it again is harmless
    worker.close()


def test_a_child_that_never_gets_ready_is_given_up(
    analyser: FaceAnalyser, grace_hopper_face: Face, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A child stuck loading would leave every known face unchecked: after a while
    the worker ends it, and the caller checks identities itself."""
    monkeypatch.setattr(identity_worker, "_READY_WAIT", 0.5)
    stuck = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    worker = IdentityWorker(_identity(analyser), stuck)
    assert worker.alive and not worker.idle and not worker.submit(1, grace_hopper_face)
    assert _soon(lambda: not (worker.idle or worker.alive), seconds=10.0)
    assert stuck.wait(10.0) != 0  # killed
    worker.close()


_NOISY_CHILD = """
import sys
from faceweave.analysis import identity_worker

class Noisy(identity_worker.DlibIdentity):
    def __init__(self, *args, **kwargs):
        print("loading the network...")  # a library talking on the standard output
        super().__init__(*args, **kwargs)
        print("loaded")

identity_worker.DlibIdentity = Noisy
sys.exit(identity_worker.main(["0"]))
"""


def test_what_the_child_prints_does_not_reach_the_answers(
    analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _NOISY_CHILD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    with IdentityWorker(_identity(analyser), child) as worker:
        assert _soon(lambda: worker.idle)
        assert worker.submit(9, grace_hopper_face)
        ((key, descriptor),) = _soon(worker.results)
        np.testing.assert_array_equal(descriptor, grace_hopper_face.embedding)


@pytest.mark.skipif(os.name != "posix", reason="POSIX sessions and signals")
def test_the_child_stays_out_of_the_terminals_ctrl_c(
    analyser: FaceAnalyser, grace_hopper_face: Face
) -> None:
    """Ctrl-C goes to the terminal's foreground process group: the child is in a
    session of its own (a live session's first Ctrl-C stops it cleanly, and the
    parent then closes the child), and ignores SIGINT all the same."""
    worker = IdentityWorker.start(_identity(analyser))
    assert worker is not None
    with worker:
        assert _soon(lambda: worker.idle)
        pid = worker._process.pid
        assert os.getpgid(pid) != os.getpgid(0)
        os.kill(pid, signal.SIGINT)
        assert worker.submit(5, grace_hopper_face)
        ((key, descriptor),) = _soon(worker.results)
        np.testing.assert_array_equal(descriptor, grace_hopper_face.embedding)
