"""Which faces to swap: one, many, or those that look like a reference person."""

from __future__ import annotations

import numpy as np

from faceweave.errors import InputError, UsageError
from faceweave.types import Face, is_real_number

SELECTORS = ("one", "many", "reference")
ORDERS = (
    "large-small",
    "small-large",
    "left-right",
    "right-left",
    "top-bottom",
    "bottom-top",
    "best-worst",
    "worst-best",
)


def order_faces(faces: list[Face], order: str = "large-small") -> list[Face]:
    """Sort faces: by size, position or detection score.

    Raises:
        UsageError: an unknown order.
        InputError: ``faces`` is not a list of Face.
    """
    if not isinstance(faces, list | tuple) or not all(isinstance(f, Face) for f in faces):
        raise InputError(f"faces must be a list of Face, got {type(faces).__name__}")
    keys = {
        "large-small": lambda f: -f.size,
        "small-large": lambda f: f.size,
        "left-right": lambda f: f.bbox[0],
        "right-left": lambda f: -f.bbox[2],
        "top-bottom": lambda f: f.bbox[1],
        "bottom-top": lambda f: -f.bbox[3],
        "best-worst": lambda f: -f.score,
        "worst-best": lambda f: f.score,
    }
    if order not in keys:
        raise UsageError(f"unknown face order {order!r}; choose from {', '.join(ORDERS)}")
    return sorted(faces, key=keys[order])


def face_distance(a: Face, b: Face) -> float:
    """L2 distance of dlib identity descriptors (same person below about 0.6).

    Raises:
        InputError: either is not a Face.
    """
    for face in (a, b):
        if not isinstance(face, Face):
            raise InputError(f"expected a Face, got {type(face).__name__}")
    return float(np.linalg.norm(a.embedding - b.embedding))


def select_faces(
    faces: list[Face],
    selector: str = "one",
    *,
    reference: Face | None = None,
    max_distance: float = 0.6,
    order: str = "large-small",
) -> list[Face]:
    """Pick the target faces.

    Args:
        faces: all faces of a frame.
        selector: ``one`` (the first in ``order``), ``many`` (all, in ``order``),
            ``reference`` (faces within ``max_distance`` of ``reference``, nearest first).
        reference: the reference face for ``reference``.
        max_distance: identity distance threshold for ``reference``.
        order: see :func:`order_faces`.
    """
    if selector not in SELECTORS:
        raise UsageError(f"unknown face selector {selector!r}; choose from {', '.join(SELECTORS)}")
    if not isinstance(faces, list | tuple) or not all(isinstance(f, Face) for f in faces):
        raise InputError(f"faces must be a list of Face, got {type(faces).__name__}")
    if reference is not None and not isinstance(reference, Face):
        raise InputError(
            f"the reference must be a Face (from FaceAnalyser.get_faces), "
            f"got {type(reference).__name__}"
        )
    if not is_real_number(max_distance) or not 0.0 <= max_distance < float("inf"):
        raise UsageError(f"max_distance must be a number of 0 or more, got {max_distance!r}")
    ordered = order_faces(list(faces), order)
    if selector == "one":
        return ordered[:1]
    if selector == "many":
        return ordered
    if reference is None:
        raise UsageError("face selector 'reference' needs a reference face")
    scored = [(face_distance(f, reference), f) for f in ordered]
    return [f for d, f in sorted(scored, key=lambda t: t[0]) if d <= max_distance]
