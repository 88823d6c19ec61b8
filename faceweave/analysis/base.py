"""Backend protocols and the name -> constructor registry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from faceweave.errors import UsageError
from faceweave.types import BBox, Frame


@dataclass(frozen=True)
class Detection:
    """A detected face box with its confidence and optional 5 keypoints (pixels)."""

    bbox: BBox
    score: float
    keypoints: NDArray[np.float32] | None = None


class FaceDetector(Protocol):
    """Finds face boxes in a frame."""

    def detect(self, frame: Frame) -> list[Detection]: ...


class LandmarkModel(Protocol):
    """Fits the 478-point mesh to one face given its box; None when it finds no face."""

    def fit(self, frame: Frame, bbox: BBox) -> NDArray[np.float32] | None: ...


class IdentityModel(Protocol):
    """Computes a 128-D identity descriptor."""

    def embed(
        self, frame: Frame, bbox: BBox, points: NDArray[np.floating] | None = None
    ) -> NDArray[np.float32]: ...


DETECTORS: dict[str, Callable[..., FaceDetector]] = {}


def register_detector(
    name: str,
) -> Callable[[Callable[..., FaceDetector]], Callable[..., FaceDetector]]:
    def wrap(ctor: Callable[..., FaceDetector]) -> Callable[..., FaceDetector]:
        DETECTORS[name] = ctor
        return ctor

    return wrap


def detector_names() -> tuple[str, ...]:
    """The registered detector backends, sorted (importing the backends registers them)."""
    from faceweave.analysis import mediapipe_backend as _mp  # noqa: F401
    from faceweave.analysis import onnx_backend as _onnx  # noqa: F401

    return tuple(sorted(DETECTORS))


def create_detector(name: str, **options: object) -> FaceDetector:
    """Build a detector by registry name (``mediapipe``, ``yunet``...)."""
    detector_names()  # registers the backends
    try:
        ctor = DETECTORS[name]
    except KeyError:
        raise UsageError(
            f"unknown detector {name!r}; choose from {', '.join(sorted(DETECTORS))}"
        ) from None
    return ctor(**options)
