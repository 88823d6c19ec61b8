"""One vocabulary for the whole package.

Conventions (written down once, tested in ``tests/test_types.py``):

* Frames are ``uint8`` arrays of shape ``(H, W, 3)`` in **BGR** order (OpenCV's).
* Image coordinates are ``(x, y)`` in pixels, origin at the top-left pixel centre.
* 3D landmarks are ``(x, y, z)`` in pixels: ``x`` right, ``y`` down, ``z`` away
  from the camera (MediaPipe's convention scaled by the image width).
* Core maths works in ``float32``; images are converted back to ``uint8`` with
  rounding and clipping only at the end of a processor.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError

Frame = NDArray[np.uint8]  # (H, W, 3) uint8 BGR


def check_frame(frame: object) -> Frame:
    """The one place frames are validated: uint8 (H, W, 3) BGR, at least 8 px each way.

    Raises:
        InputError: anything else (a grey or BGRA image, floats, not an array).
    """
    if not isinstance(frame, np.ndarray):
        raise InputError(f"expected a numpy image, got {type(frame).__name__}")
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
        raise InputError(f"expected a uint8 (H, W, 3) BGR image, got {frame.dtype} {frame.shape}")
    if frame.shape[0] < 8 or frame.shape[1] < 8:
        raise InputError(f"image too small: {frame.shape[1]}x{frame.shape[0]}")
    return frame


def is_whole_number(value: object) -> bool:
    """Whether ``value`` is a Python or numpy integer (a bool is not: True is no count)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def is_real_number(value: object) -> bool:
    """Whether ``value`` is a Python or numpy integer or float, bools excluded (NaN is
    one: a range check after this refuses it)."""
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool)


Mask = NDArray[np.float32]  # (H, W) float32 in [0, 1]
FloatImage = NDArray[np.float32]  # (H, W, C) float32
Points2D = NDArray[np.float32]  # (N, 2) float32 (x, y) pixels
Points3D = NDArray[np.float32]  # (N, 3) float32 (x, y, z) pixels
Landmarks478 = Points3D  # (478, 3) MediaPipe face mesh with irises
Landmarks68 = Points2D  # (68, 2) dlib / iBUG 300-W layout
Landmarks5 = Points2D  # (5, 2) right eye, left eye, nose tip, right and left mouth corner
Embedding = NDArray[np.float32]  # (128,) dlib identity descriptor, L2 distance
Triangles = NDArray[np.int32]  # (T, 3) vertex indices
Matrix2x3 = NDArray[np.float64]  # (2, 3) affine transform
BBox = tuple[float, float, float, float]  # (x0, y0, x1, y1) pixels


@dataclass(frozen=True)
class Pose:
    """Similarity pose of a face against the canonical face.

    ``points ≈ scale * canonical @ rotation.T + translation``.

    Attributes:
        rotation: (3, 3) rotation matrix.
        scale: pixels per canonical unit.
        translation: (3,) translation in pixels.
        yaw: degrees, positive when the nose points to the image's left.
        pitch: degrees, positive when the face looks down.
        roll: degrees, positive for a clockwise in-plane tilt.
    """

    rotation: NDArray[np.float64]
    scale: float
    translation: NDArray[np.float64]
    yaw: float
    pitch: float
    roll: float


@dataclass(frozen=True, eq=False)
class Face:
    """A face found in a frame. Immutable; the embedding is computed on first use.
    A pickled face keeps its embedding if it was computed (else it has none).

    Attributes:
        bbox: (x0, y0, x1, y1) pixels.
        score: detection confidence in [0, 1].
        landmarks_478: (478, 3) mesh with irises, pixels.
        landmarks_5: (5, 2) eyes, nose tip, mouth corners, pixels, in the face's own
            order: its right eye and mouth corner first (image-left when upright).
        pose: similarity pose against the canonical face.
        frame_shape: (H, W) of the frame it was found in.
        frame: the frame itself (a reference, not a copy), which a source face
            needs for its texture; None when the face was built without it.
        rest: (478, 3) the face's shape at rest in pose space (canonical units),
            when a video track has seen enough of it (see
            :class:`~faceweave.pipeline.tracking.FaceTracker`): a swap measures
            the source's identity shape against it, so that all of the face's
            expression (a raised brow, a frown) stays; None for a still image.
        rest_detail: (S, S) the face's skin detail at rest in face space (see
            :mod:`faceweave.core.creases`), kept by a video track like ``rest``:
            a swap lays what the skin shows beyond it (frown lines, crow's feet)
            on the source; None for a still image.
        track_state: a dict a video track keeps for its face, the same object in
            every frame of the track (a new one from a jump on): a swapper keeps
            there what it follows over time (the colour along the mask's edge, the
            brows' lifts), each swapper its own; None for a still image.
    """

    bbox: BBox
    score: float
    landmarks_478: Landmarks478
    landmarks_5: Landmarks5
    pose: Pose
    frame_shape: tuple[int, int]
    frame: Frame | None = field(default=None, repr=False)
    _embedding_fn: Callable[[], Embedding] | None = field(default=None, repr=False)
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    rest: NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    rest_detail: NDArray[np.float32] | None = field(default=None, repr=False, compare=False)
    track_state: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def landmarks_2d(self) -> Points2D:
        """(478, 2) image positions of the mesh."""
        return self.landmarks_478[:, :2]

    @property
    def size(self) -> float:
        """Geometric mean of the box sides, pixels."""
        x0, y0, x1, y1 = self.bbox
        return float(np.sqrt(max(x1 - x0, 1e-6) * max(y1 - y0, 1e-6)))

    @property
    def embedding(self) -> Embedding:
        """(128,) dlib identity descriptor, computed once on first access."""
        if "embedding" not in self._cache:
            compute = self._embedding_fn
            if compute is None and "embedding" not in self._cache:  # (or done meanwhile)
                raise InputError(
                    "this face has no identity embedding (an analyser made with "
                    "with_embedding=False, or a Face built by hand, attaches none)"
                )
            if compute is not None:
                self._cache["embedding"] = compute()
                # Done with it: what it holds (an identity model) goes once no face
                # needs it.
                object.__setattr__(self, "_embedding_fn", None)
        value: Embedding = self._cache["embedding"]
        return value

    @property
    def has_embedding(self) -> bool:
        return self._embedding_fn is not None or "embedding" in self._cache

    # Pickled (for another process, or a cache on disk), a face keeps its embedding if
    # it was computed, but not the lazy computation: that is the analyser's identity
    # model, which does not travel. Copies (copy, deepcopy) keep it.
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_embedding_fn"] = None
        if self.track_state is not None:  # (what each swapper follows stays here)
            state["track_state"] = {
                key: value for key, value in self.track_state.items() if key != "swappers"
            }
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __copy__(self) -> Face:
        copied = object.__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict[int, Any]) -> Face:
        copied = object.__new__(type(self))
        memo[id(self)] = copied
        for name, value in self.__dict__.items():
            kept = value if name == "_embedding_fn" else copy.deepcopy(value, memo)
            copied.__dict__[name] = kept
        return copied
