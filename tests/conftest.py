"""Shared fixtures: package-shipped face photos, one analyser, faces analysed once per session."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from faceweave.analysis.analyser import FaceAnalyser
from faceweave.types import Face


def _astronaut_bgr() -> np.ndarray:
    from skimage import data

    return np.ascontiguousarray(cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2BGR))


def _grace_hopper_bgr() -> np.ndarray:
    from matplotlib import cbook
    from PIL import Image

    with cbook.get_sample_data("grace_hopper.jpg") as fh:
        rgb = np.asarray(Image.open(fh).convert("RGB"))
    return np.ascontiguousarray(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))


def _read_only(frame: np.ndarray) -> np.ndarray:
    # Session-wide frames are shared by many tests: a test that writes into one fails loudly.
    frame.setflags(write=False)
    return frame


@pytest.fixture(scope="session")
def astronaut() -> np.ndarray:
    """skimage's astronaut (Eileen Collins), (512, 512, 3) uint8 BGR, one frontal face."""
    return _read_only(_astronaut_bgr())


@pytest.fixture(scope="session")
def grace_hopper() -> np.ndarray:
    """matplotlib's Grace Hopper portrait, (600, 512, 3) uint8 BGR, one frontal face."""
    return _read_only(_grace_hopper_bgr())


@pytest.fixture(scope="session")
def astronaut_flipped(astronaut: np.ndarray) -> np.ndarray:
    """The astronaut mirrored left-right: the same person, a different image."""
    return _read_only(np.ascontiguousarray(astronaut[:, ::-1]))


@pytest.fixture(scope="session")
def pair_frame(astronaut: np.ndarray, grace_hopper: np.ndarray) -> np.ndarray:
    """Both package faces side by side: astronaut (smaller face) left, Grace Hopper right."""
    h = grace_hopper.shape[0]
    pad = np.full((h - astronaut.shape[0], astronaut.shape[1], 3), 127, np.uint8)
    return _read_only(np.ascontiguousarray(np.hstack([np.vstack([astronaut, pad]), grace_hopper])))


@pytest.fixture(scope="session")
def analyser() -> FaceAnalyser:
    return FaceAnalyser()


@pytest.fixture(scope="session")
def astronaut_faces(analyser: FaceAnalyser, astronaut: np.ndarray) -> list[Face]:
    return analyser.get_faces(astronaut)


@pytest.fixture(scope="session")
def grace_hopper_faces(analyser: FaceAnalyser, grace_hopper: np.ndarray) -> list[Face]:
    return analyser.get_faces(grace_hopper)


@pytest.fixture(scope="session")
def astronaut_flipped_faces(analyser: FaceAnalyser, astronaut_flipped: np.ndarray) -> list[Face]:
    return analyser.get_faces(astronaut_flipped)


@pytest.fixture(scope="session")
def pair_faces(analyser: FaceAnalyser, pair_frame: np.ndarray) -> list[Face]:
    return analyser.get_faces(pair_frame)


@pytest.fixture(scope="session")
def astronaut_face(astronaut_faces: list[Face]) -> Face:
    assert len(astronaut_faces) == 1, "the analyser must find the astronaut's face"
    return astronaut_faces[0]


@pytest.fixture(scope="session")
def grace_hopper_face(grace_hopper_faces: list[Face]) -> Face:
    assert len(grace_hopper_faces) == 1, "the analyser must find Grace Hopper's face"
    return grace_hopper_faces[0]


@pytest.fixture(scope="session")
def shared_faces() -> Path:
    """The shared face photo collection (../shared/data/faces); skips when it is absent."""
    path = Path(__file__).resolve().parents[1].parent / "shared/data/faces"
    if not path.is_dir():
        pytest.skip(f"shared face photos not available at {path}")
    return path
