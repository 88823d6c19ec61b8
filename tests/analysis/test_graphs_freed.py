"""MediaPipe graphs are freed: by ``close()``, and once their owner is dropped.

A MediaPipe solution's output callbacks hold the solution, a cycle through C++ that
Python's collector cannot see: a graph never closed kept its threads and about 35 MiB
until the process ended. Every analyser a command, a live session or a program built
and dropped stayed in memory (the test suite's process grew past 20 GB).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import time
import weakref
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from av import VideoFrame

from faceweave.analysis.analyser import FaceAnalyser, photo_analyser
from faceweave.analysis.hands import MediaPipeHands
from faceweave.analysis.mediapipe_backend import BlazeFaceDetector, MeshLandmarker
from faceweave.errors import BackendError


def _graphs(analyser: FaceAnalyser) -> list[Any]:
    """The MediaPipe solutions an analyser has built (its cached models)."""
    found = []
    for name in ("detector", "_edge_detector", "_turned_detector", "landmarker"):
        model = analyser.__dict__.get(name)
        for attr in ("_short", "_full", "_static", "_tracking", "_region"):
            graph = getattr(model, attr, None)
            if graph is not None and all(graph is not seen for seen in found):
                found.append(graph)
    return found


def _dead(refs: list[weakref.ref[Any]]) -> bool:
    gc.collect()
    return all(ref() is None for ref in refs)


def test_a_dropped_analysers_graphs_are_freed(astronaut: np.ndarray) -> None:
    analyser = photo_analyser()
    assert analyser.get_faces(astronaut)
    refs = [weakref.ref(graph) for graph in _graphs(analyser)]
    assert len(refs) >= 4  # both detectors (tiles: the turned passes' too) and the meshes
    del analyser
    assert _dead(refs)


def test_a_closed_analyser_frees_its_graphs_and_loads_them_again(astronaut: np.ndarray) -> None:
    with FaceAnalyser(mode="video") as analyser:
        first = analyser.get_faces(astronaut)
        refs = [weakref.ref(graph) for graph in _graphs(analyser)]
        assert refs
    assert _dead(refs) and _graphs(analyser) == []
    again = analyser.get_faces(astronaut)  # the models load again
    assert len(again) == len(first) == 1
    np.testing.assert_allclose(again[0].bbox, first[0].bbox, atol=1.0)
    analyser.close()
    analyser.close()  # a second close does nothing


def test_each_graph_owner_closes_once_and_frees_when_dropped(astronaut: np.ndarray) -> None:
    detector = BlazeFaceDetector(adaptive=False)
    mesh = MeshLandmarker()
    hands = MediaPipeHands()
    assert detector.detect(astronaut)
    refs = [
        weakref.ref(graph)
        for graph in (detector._short, detector._full, mesh._static, mesh._tracking, hands._graph)
    ]
    for owner in (detector, mesh, hands):
        owner.close()
        owner.close()
    del detector, mesh, hands, owner
    assert _dead(refs)
    # Dropped without a close.
    dropped = [BlazeFaceDetector(), MeshLandmarker(), MediaPipeHands()]
    refs = [weakref.ref(dropped[0]._full), weakref.ref(dropped[1]._static)]
    refs.append(weakref.ref(dropped[2]._graph))
    del dropped
    assert _dead(refs)


def test_a_live_sessions_processor_frees_its_analyser(astronaut: np.ndarray) -> None:
    from faceweave.service.live import FrameProcessor, default_analyser

    built: list[FaceAnalyser] = []

    def factory() -> FaceAnalyser:
        built.append(default_analyser())
        return built[-1]

    processor = FrameProcessor(factory)
    frame = VideoFrame.from_ndarray(np.ascontiguousarray(astronaut), format="bgr24")
    frame.pts, frame.time_base = 0, Fraction(1, 90000)
    assert processor.process(frame)[1] == 1
    refs = [weakref.ref(graph) for graph in _graphs(built[0])]
    assert refs
    processor.close()
    assert _dead(refs)


FIRST_IMPORT = """
import gc, weakref
from faceweave.analysis.hands import MediaPipeHands
hands = MediaPipeHands()  # imports mediapipe
graph = weakref.ref(hands._graph)
hands.close()
owner = weakref.ref(hands)
del hands
gc.collect()
print(owner() is None, graph() is None)
"""


def test_what_first_imports_mediapipe_is_freed_too() -> None:
    """MediaPipe keeps the error of its audio module's import (no PortAudio) with
    its traceback: the frames of whatever imported it first, and their locals."""
    done = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORT], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]


def test_a_kept_face_does_not_keep_its_analysers_graphs(astronaut: np.ndarray) -> None:
    """A program that keeps the faces (or sources made from them) of analysers it
    drops: each kept face had kept its analyser, graphs and all, alive."""
    analyser = FaceAnalyser()
    (face,) = analyser.get_faces(astronaut)
    (twin,) = analyser.get_faces(astronaut)
    refs = [weakref.ref(graph) for graph in _graphs(analyser)]
    owner = weakref.ref(analyser)
    del analyser
    assert _dead(refs) and owner() is None
    # The lazy embedding still works without it, and lets go of its model once done.
    embedding = face.embedding
    assert embedding.shape == (128,) and face.has_embedding
    assert face._embedding_fn is None
    np.testing.assert_allclose(twin.embedding, embedding, atol=1e-5)


def test_close_waits_for_the_calls_under_way_in_other_threads(astronaut: np.ndarray) -> None:
    """Closed while other threads analyse with it, the analyser lets their calls end
    first, and they go on with the models loaded again (its graphs had been closed
    under them: "_graph is None")."""
    analyser = photo_analyser(with_embedding=False)
    errors: list[BaseException] = []
    found: list[int] = []
    stop = threading.Event()

    def analyse() -> None:
        while not stop.is_set():
            try:
                found.append(len(analyser.get_faces(astronaut)))
            except BaseException as exc:  # noqa: BLE001 - what the test looks for
                errors.append(exc)
                return

    threads = [threading.Thread(target=analyse) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 3.0
    closes = 0
    while time.monotonic() < deadline and not errors:
        time.sleep(0.05)
        analyser.close()
        closes += 1
    stop.set()
    for thread in threads:
        thread.join(30)
    assert errors == [] and closes > 5
    assert found and set(found) == {1}
    analyser.close()


def test_a_closed_detector_or_mesh_says_so() -> None:
    detector = BlazeFaceDetector()
    detector.close()
    with pytest.raises(BackendError, match="closed"):
        detector.detect(np.zeros((64, 64, 3), np.uint8))
    mesh = MeshLandmarker()
    mesh.close()
    with pytest.raises(BackendError, match="closed"):
        mesh.fit(np.zeros((64, 64, 3), np.uint8), (8.0, 8.0, 56.0, 56.0))


FORKED = """
import gc, os, sys, time
import numpy as np
from faceweave.analysis.analyser import FaceAnalyser
analyser = FaceAnalyser()
analyser.get_faces(np.zeros((64, 64, 3), np.uint8))  # its graphs built, with threads
pid = os.fork()
if pid == 0:  # the child drops what the parent built
    del analyser
    gc.collect()
    os._exit(0)
for _ in range(300):
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        print("child", os.waitstatus_to_exitcode(status))
        break
    time.sleep(0.1)
else:
    os.kill(pid, 9)
    print("child hung")
"""


def test_a_forked_child_that_drops_an_analyser_does_not_hang() -> None:
    """The graphs' threads are the parent's: a child closing them waited for ever."""
    done = subprocess.run(
        [sys.executable, "-c", FORKED], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["child", "0"]


def test_an_analyser_cannot_be_closed_inside_its_own_call(astronaut: np.ndarray) -> None:
    """(It would wait for that call, its own, for ever.)"""
    analyser = FaceAnalyser(with_embedding=False)
    errors: list[BaseException] = []

    class ClosesIt:
        def fit(self, *args: object, **kwargs: object) -> None:
            try:
                analyser.close()
            except BaseException as exc:  # noqa: BLE001 - what the test looks for
                errors.append(exc)

    analyser.__dict__["landmarker"] = ClosesIt()
    assert analyser.face_from_box(astronaut, (180.0, 60.0, 300.0, 200.0)) is None
    assert [type(e).__name__ for e in errors] == ["UsageError"]
    analyser.close()  # outside any call: fine
