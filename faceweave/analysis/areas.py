"""Parts of a face to swap, from its mesh (no model): FaceFusion's ``area`` face mask.

``--mask-areas upper-face`` swaps the face above the nose's bottom (brows, eyes, the
nose, the forehead), ``lower-face`` the face below it (cheeks under the nose, the
mouth, the chin), ``mouth`` the lips and what lies between them; several may be
given. The rest of the face stays the target's: it is handed to the engines as what
covers the face (see :mod:`faceweave.analysis.occluder`), so it is laid back after
the swap and left out of what the swap measures, and it combines with a face
occluder's and a face parser's finds. The parts follow the target's mesh: each
triangle of the face model belongs to the part its middle lies in, in the face's own
(pose-normalised) frame, so a turned or tilted face is cut along its own nose line.
A soft edge (a Gaussian of ``feather`` of the crop) joins the swapped part to the
kept one.
"""

from __future__ import annotations

from collections.abc import Iterable

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.occluder import Occluder, Occlusion
from faceweave.core.align import ffhq_alignment
from faceweave.core.facemodel import FaceModel, load_face_model
from faceweave.errors import InputError, UsageError
from faceweave.types import Face, Frame, check_frame

__all__ = ["AREAS", "FaceAreas", "checked_areas"]

AREAS = ("upper-face", "lower-face", "mouth")
# The mesh point at the nose's bottom (subnasale): the line between the upper and the
# lower face, in the model's canonical frame.
NOSE_BOTTOM = 2
# The mouth's area: the lips' outline grown by this share round its middle.
MOUTH_GROWTH = 0.15
AREA_SIZE = 256
AREA_FEATHER = 0.03


def checked_areas(areas: object) -> tuple[str, ...]:
    """``areas`` as a tuple of names from :data:`AREAS`, each once, in that order.

    Raises:
        InputError: not a list of known area names.
    """
    if isinstance(areas, str):
        areas = [areas]
    if isinstance(areas, (bytes, bytearray, dict)) or not isinstance(areas, Iterable):
        raise InputError(f"areas are a list of names from {', '.join(AREAS)}; got {areas!r}")
    names = list(dict.fromkeys(areas))
    if not names:
        raise InputError(f"give one or more areas from {', '.join(AREAS)}")
    for name in names:
        if not isinstance(name, str) or name not in AREAS:
            raise InputError(f"unknown face area {name!r}: choose from {', '.join(AREAS)}")
    return tuple(a for a in AREAS if a in names)


class FaceAreas(Occluder):
    """Swaps only ``areas`` of each face (see the module); no model file.

    Args:
        areas: names from :data:`AREAS`.
        feather: the soft edge between the parts, a share of the face crop, 0..0.2.
        model: the face model (the packaged one by default).

    Example:
        >>> mouth = FaceAreas(["mouth"])  # doctest: +SKIP
        >>> mouth_only = fw.Swapper(source_face).with_occluder(mouth)  # doctest: +SKIP
    """

    def __init__(
        self,
        areas: Iterable[str],
        *,
        feather: float = AREA_FEATHER,
        model: FaceModel | None = None,
    ) -> None:
        self.areas = checked_areas(areas)
        if (
            isinstance(feather, bool | np.bool_)
            or not isinstance(feather, int | float | np.integer | np.floating)
            or not 0.0 <= float(feather) <= 0.2
        ):
            raise UsageError(f"the areas' feather is a number in [0, 0.2], got {feather!r}")
        self.feather = float(feather)
        self.model = model or load_face_model()
        canonical = self.model.canonical
        middles = canonical[self.model.triangles].mean(axis=1)
        upper = middles[:, 1] < canonical[NOSE_BOTTOM, 1]
        chosen = np.zeros(len(middles), bool)
        if "upper-face" in self.areas:
            chosen |= upper
        if "lower-face" in self.areas:
            chosen |= ~upper
        self._triangles = self.model.triangles[chosen]
        # The mesh's holes (the eyes' and the mouth's openings), filled with their part:
        # the eyes with the upper face, the mouth with the lower face (the mouth's own
        # area is the lips' outline, grown a little).
        self._eyes = (
            [np.unique(self.model.regions[eye]) for eye in ("left_eye", "right_eye")]
            if "upper-face" in self.areas
            else []
        )
        self._lips = np.unique(self.model.regions["lips"])
        self._mouth = "mouth" in self.areas

    def for_source(self) -> Occluder | None:
        """None: the parts are the target's choice; a source photo's face is seen whole."""
        return None

    def occlusion(self, frame: Frame, face: Face) -> Occlusion:
        """The parts not asked for, in ``face``'s FFHQ crop, as what covers it."""
        frame = check_frame(frame)
        if not isinstance(face, Face):
            raise InputError(f"expected a Face, got {type(face).__name__}")
        matrix = ffhq_alignment(face.landmarks_5, AREA_SIZE)
        points = face.landmarks_478[:, :2] @ matrix[:, :2].T + matrix[:, 2]
        fixed = np.round(points * 16).astype(np.int32)  # 4 fractional bits
        kept = np.zeros((AREA_SIZE, AREA_SIZE), np.uint8)
        for triangle in fixed[self._triangles]:
            cv2.fillConvexPoly(kept, triangle, 1, cv2.LINE_8, 4)

        def fill(mask: NDArray[np.uint8], rim: NDArray[np.float64]) -> None:
            hull = cv2.convexHull(np.round(rim * 16).astype(np.int32))
            cv2.fillConvexPoly(mask, hull, 1, cv2.LINE_8, 4)

        for eye in self._eyes:
            fill(kept, points[eye])
        lips = points[self._lips]
        middle = lips.mean(axis=0)
        if "lower-face" in self.areas:
            fill(kept, lips)
        visible = kept.astype(np.float32)
        sigma = self.feather * AREA_SIZE
        if sigma > 0:
            visible = cv2.GaussianBlur(visible, (0, 0), sigma)
        if self._mouth:
            # The mouth alone is small: its own edge is half as soft.
            mouth = np.zeros_like(kept)
            fill(mouth, middle + (lips - middle) * (1.0 + MOUTH_GROWTH))
            soft = mouth.astype(np.float32)
            if sigma > 0:
                soft = cv2.GaussianBlur(soft, (0, 0), sigma / 2)
            visible = np.maximum(visible, soft)
        return Occlusion(np.asarray(visible, np.float32), matrix)
