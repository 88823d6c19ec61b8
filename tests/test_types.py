"""Tests for faceweave.types: immutability, lazy embedding, the dtype policy."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from faceweave.core.geometry import rotation_from_euler
from faceweave.types import Face, Pose


def _pose() -> Pose:
    return Pose(rotation_from_euler(0, 0, 0), 100.0, np.zeros(3), 0.0, 0.0, 0.0)


def _face(embedding_fn=None) -> Face:  # type: ignore[no-untyped-def]
    return Face(
        bbox=(10.0, 20.0, 50.0, 100.0),
        score=0.9,
        landmarks_478=np.zeros((478, 3), np.float32),
        landmarks_5=np.zeros((5, 2), np.float32),
        pose=_pose(),
        frame_shape=(120, 160),
        _embedding_fn=embedding_fn,
    )


def test_face_frozen() -> None:
    face = _face()
    with pytest.raises(dataclasses.FrozenInstanceError):
        face.score = 0.1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        face.bbox = (0.0, 0.0, 1.0, 1.0)  # type: ignore[misc]


def test_pose_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        _pose().yaw = 3.0  # type: ignore[misc]


def test_embedding_cached() -> None:
    calls = []

    def fake() -> np.ndarray:
        calls.append(1)
        return np.arange(128, dtype=np.float32)

    face = _face(fake)
    assert face.has_embedding
    assert not calls  # lazy
    first = face.embedding
    second = face.embedding
    assert len(calls) == 1
    assert first is second
    np.testing.assert_array_equal(first, np.arange(128))


def test_embedding_missing_backend() -> None:
    face = _face()
    assert not face.has_embedding
    with pytest.raises(ValueError):
        _ = face.embedding


def _embedding() -> np.ndarray:  # module-level: the test's own picklable stand-in
    return np.arange(128, dtype=np.float32)


def test_a_pickled_face_keeps_a_computed_embedding_but_not_the_lazy_one() -> None:
    """An analyser's embedding is a closure over its identity model, which does not
    pickle: a pickled face keeps the embedding if it was computed, else has none. Copies
    keep the lazy one."""
    import copy
    import pickle

    calls = []

    def lazy() -> np.ndarray:  # a closure, as the analyser's
        calls.append(1)
        return _embedding()

    face = _face(lazy)
    unpickled = pickle.loads(pickle.dumps(face))
    assert not calls and not unpickled.has_embedding
    np.testing.assert_array_equal(unpickled.landmarks_478, face.landmarks_478)
    assert unpickled.bbox == face.bbox and unpickled.pose.scale == face.pose.scale
    for copied in (copy.copy(face), copy.deepcopy(face)):
        assert copied.has_embedding
    _ = face.embedding
    again = pickle.loads(pickle.dumps(face))
    assert again.has_embedding and len(calls) == 1
    np.testing.assert_array_equal(again.embedding, _embedding())
    assert len(calls) == 1  # taken from what travelled, not computed again
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.score = 0.1  # type: ignore[misc]


def test_an_analysers_face_pickles(astronaut_face: Face, astronaut: np.ndarray) -> None:
    import pickle

    from faceweave.processors.swap import Swapper

    expected = astronaut_face.embedding
    unpickled = pickle.loads(pickle.dumps(astronaut_face))
    np.testing.assert_array_equal(unpickled.embedding, expected)
    assert unpickled.frame is not None
    np.testing.assert_array_equal(unpickled.frame, astronaut)
    swapped = Swapper(unpickled).swap(astronaut, [unpickled])
    np.testing.assert_array_equal(
        swapped, Swapper(astronaut_face).swap(astronaut, [astronaut_face])
    )
    # A tracked face that swappers have followed pickles too (each swapper's state,
    # kept by weak reference to it, stays in this process).
    import copy
    import dataclasses

    tracked = dataclasses.replace(astronaut_face, track_state={})
    Swapper(astronaut_face).swap(astronaut, [tracked])
    assert tracked.track_state is not None and "swappers" in tracked.track_state
    unpickled = pickle.loads(pickle.dumps(tracked))
    assert unpickled.track_state is not None and "swappers" not in unpickled.track_state
    assert copy.deepcopy(tracked).track_state is not None  # (a copy here: all of it)


def test_identity_equality() -> None:
    # eq=False: faces compare by identity (arrays inside make value equality ambiguous).
    assert _face() != _face()
    face = _face()
    assert face == face
    assert len({face, face}) == 1


def test_size_and_landmarks_2d() -> None:
    face = _face()
    assert face.size == pytest.approx(np.sqrt(40.0 * 80.0))
    assert face.landmarks_2d.shape == (478, 2)


def test_dtype_policy_analyser_outputs(astronaut_face: Face, astronaut: np.ndarray) -> None:
    face = astronaut_face
    assert face.landmarks_478.dtype == np.float32 and face.landmarks_478.shape == (478, 3)
    assert face.landmarks_2d.dtype == np.float32
    assert face.landmarks_5.dtype == np.float32 and face.landmarks_5.shape == (5, 2)
    assert face.embedding.dtype == np.float32 and face.embedding.shape == (128,)
    assert all(isinstance(v, float) for v in face.bbox) and isinstance(face.score, float)
    assert face.frame_shape == astronaut.shape[:2]
    assert all(isinstance(v, int) for v in face.frame_shape)
    assert face.pose.rotation.dtype == np.float64 and face.pose.translation.dtype == np.float64
    assert face.frame is not None and face.frame.dtype == np.uint8 and face.frame.ndim == 3
    # z away from the camera: the nose tip is nearer than the face's mean depth.
    assert face.landmarks_478[1, 2] < face.landmarks_478[:468, 2].mean()
    # The mesh scale is pixels: z spread comparable to the face width.
    assert np.ptp(face.landmarks_478[:468, 2]) > 0.2 * (face.bbox[2] - face.bbox[0])


def test_number_kinds_leave_bools_out() -> None:
    """The one test of what counts as a whole or real number for options and arguments."""
    from faceweave.types import is_real_number, is_whole_number

    assert [is_whole_number(v) for v in (3, np.int64(3), True, np.bool_(True), 3.0, "3")] == [
        True,
        True,
        False,
        False,
        False,
        False,
    ]
    assert [is_real_number(v) for v in (3, 0.5, np.float32(0.5), True, np.bool_(True), "0.5")] == [
        True,
        True,
        True,
        False,
        False,
        False,
    ]
