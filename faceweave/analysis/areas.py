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

from faceweave.analysis.occluder import Occluder, Occlusion, checked_names, checked_target
from faceweave.core.align import ffhq_alignment
from faceweave.core.facemodel import FaceModel, load_face_model
from faceweave.errors import InputError, UsageError
from faceweave.types import Face, Frame

__all__ = ["AREAS", "FaceAreas", "checked_areas"]

AREAS = ("upper-face", "lower-face", "mouth")
# The mesh point at the nose's bottom (subnasale): the line between the upper and the
# lower face, in the model's canonical frame.
NOSE_BOTTOM = 2
# The mouth's area: the lips' outline grown by this share round its middle.
MOUTH_GROWTH = 0.15
AREA_SIZE = 256
AREA_FEATHER = 0.03
# Wider, the blur would fade a part's middle too (at 0.15 the upper face reached 0.7).
MAX_FEATHER = 0.06


def checked_areas(areas: object) -> tuple[str, ...]:
    """``areas`` as a tuple of names from :data:`AREAS`, each once, in that order.

    Raises:
        InputError: not a list of known area names.
    """
    names = checked_names(areas, AREAS, "area")
    return tuple(a for a in AREAS if a in names)


class FaceAreas(Occluder):
    """Swaps only ``areas`` of each face (see the module); no model file.

    Args:
        areas: names from :data:`AREAS`.
        feather: the soft edge between the parts, a share of the face crop, 0..0.06.
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
            or not 0.0 <= float(feather) <= MAX_FEATHER
        ):
            raise UsageError(
                f"the areas' feather is a number in [0, {MAX_FEATHER:g}], got {feather!r}"
            )
        self.feather = float(feather)
        if model is not None and not isinstance(model, FaceModel):
            raise InputError(f"model is a FaceModel, got {type(model).__name__}")
        self.model = model or load_face_model()
        canonical = self.model.canonical
        middles = canonical[self.model.triangles].mean(axis=1)
        upper = middles[:, 1] < canonical[NOSE_BOTTOM, 1]
        chosen = np.zeros(len(middles), bool)
        if "upper-face" in self.areas:
            chosen |= upper
        if "lower-face" in self.areas:
            chosen |= ~upper
        self._chosen = chosen
        # The mesh's holes (the eyes' and the mouth's openings), filled with their part:
        # the eyes with the upper face, the mouth with the lower face (the mouth's own
        # area is the lips' outline, grown a little).
        self._eyes_of_model = [
            np.unique(self.model.regions[eye]) for eye in ("left_eye", "right_eye")
        ]
        self._eyes = self._eyes_of_model if "upper-face" in self.areas else []
        self._lips = np.unique(self.model.regions["lips"])
        self._nose = np.unique(self.model.regions["nose"])
        self._mouth = "mouth" in self.areas

    def for_source(self) -> Occluder | None:
        """None: the parts are the target's choice; a source photo's face is seen whole."""
        return None

    def occlusion(self, frame: Frame, face: Face) -> Occlusion:
        """The parts not asked for, in ``face``'s FFHQ crop, as what covers it.

        The soft edge is a normalised blur: the parts' mask blurred over the whole
        face's, so the face's own outline stays sharp (the engine's mask softens it)
        and all three parts together are the whole face. The nose is kept whole on
        its side of the cut (a blur across the nostrils drew two of them)."""
        checked_target(frame, face)
        matrix = ffhq_alignment(face.landmarks_5, AREA_SIZE)
        points = face.landmarks_478[:, :2] @ matrix[:, :2].T + matrix[:, 2]
        if not np.isfinite(points).all():
            raise InputError("the face's landmarks are not finite")
        fixed = np.round(points * 16).astype(np.int32)  # 4 fractional bits

        def fill(mask: NDArray[np.uint8], rim: NDArray[np.float64]) -> None:
            hull = cv2.convexHull(np.round(rim * 16).astype(np.int32))
            cv2.fillConvexPoly(mask, hull, 1, cv2.LINE_8, 4)

        def blurred(mask: NDArray[np.uint8], sigma: float) -> NDArray[np.float32]:
            soft = mask.astype(np.float32)
            return cv2.GaussianBlur(soft, (0, 0), sigma) if sigma > 0 else soft

        parts = np.zeros((AREA_SIZE, AREA_SIZE), np.uint8)
        whole = np.zeros_like(parts)
        for triangle, chosen in zip(fixed[self.model.triangles], self._chosen, strict=True):
            cv2.fillConvexPoly(whole, triangle, 1, cv2.LINE_8, 4)
            if chosen:
                cv2.fillConvexPoly(parts, triangle, 1, cv2.LINE_8, 4)
        lips = points[self._lips]
        for rim in [points[eye] for eye in self._eyes_of_model] + [lips]:
            fill(whole, rim)
        for eye in self._eyes:
            fill(parts, points[eye])
        if "lower-face" in self.areas:
            fill(parts, lips)
        sigma = self.feather * AREA_SIZE
        visible = blurred(parts, sigma) / np.maximum(blurred(whole, sigma), 1e-3)
        nose = np.zeros_like(parts)
        fill(nose, points[self._nose])
        upper, lower = "upper-face" in self.areas, "lower-face" in self.areas
        if upper != lower:
            hard = blurred(nose, sigma / 4)
            visible = np.maximum(visible, hard) if upper else np.minimum(visible, 1.0 - hard)
        if self._mouth:
            # The mouth alone is small: its own edge is half as soft.
            mouth = np.zeros_like(parts)
            middle = lips.mean(axis=0)
            fill(mouth, middle + (lips - middle) * (1.0 + MOUTH_GROWTH))
            visible = np.maximum(visible, blurred(mouth, sigma / 2))
        visible = np.clip(visible, 0.0, 1.0)
        return Occlusion(np.asarray(visible, np.float32), matrix)
