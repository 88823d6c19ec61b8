"""What covers a face, from an ONNX face occluder a user brings (faceweave ships no weights).

A face occluder segments the face that is seen in an aligned crop: 1 where its skin
shows, 0 where something lies in front of it (a hand, a microphone, hair, a cup, a
scarf) and outside it. DeepFaceLab's XSeg, exported to ONNX, is the model FaceFusion
runs for its ``occlusion`` face mask. A swap that knows the area keeps the target's
pixels there (``--occluder-model``; see :class:`~faceweave.processors.swap.FaceSwapping`).

The model's contract, checked when it loads (another signature is one clear line):

* one image input, float32 (or float16), either ``[1, S, S, 3]`` (channels last, as
  XSeg's ``in_face:0``) or ``[1, 3, S, S]``; S = 256 where the file leaves it open.
  The face is aligned by its five points to ArcFace's template at S px (the crop
  inswapper sees, scaled: see :func:`~faceweave.core.align.alignment`), BGR, 0..1.
* one output, ``[1, S, S, 1]``, ``[1, 1, S, S]`` or ``[1, S, S]``: the face's
  visibility, 0..1.

Around the model: its output is smoothed (a Gaussian of ``S / 128`` px) and what
reads under one half taken as covered, ramping to seen at 1, so that an
occluder's own edge stays covered rather than a soft mix of both.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.onnx_backend import OnnxModel
from faceweave.core.align import aligned_crop, alignment
from faceweave.errors import BackendError, InputError
from faceweave.types import Face, Frame, check_frame

__all__ = [
    "OCCLUDER_SIZE",
    "FaceOccluder",
    "Occluder",
    "Occluders",
    "Occlusion",
    "lay_back",
    "checked_names",
    "checked_target",
    "merged",
    "occlusion_of",
    "ramped",
]

# The crop's side where the model's file leaves it open (XSeg's), and the largest taken.
OCCLUDER_SIZE = 256
OCCLUDER_MAX_SIZE = 2048
# The model's output smoothed over this share of the crop's side (a Gaussian's sigma).
OCCLUDER_SMOOTH = 1.0 / 128.0
# A face's own area, for laying back what covers it: its mesh's outline grown by this
# share of its size round its middle (an occluder at the jaw's edge is covered whole).
FACE_AREA_GROWTH = 0.1
_FLOAT_TYPES = ("tensor(float)", "tensor(float16)")


@dataclass(frozen=True)
class Occlusion:
    """One face's occlusion, in the aligned crop the occluder saw.

    Attributes:
        visible: (S, S) float32, 1 where the face shows, 0 where something covers it
            (and outside the face).
        matrix: (2, 3) float64, frame pixels to the crop's pixels.
    """

    visible: NDArray[np.float32]
    matrix: NDArray[np.float64]

    def __post_init__(self) -> None:
        visible = np.asarray(self.visible)
        matrix = np.asarray(self.matrix)
        if (
            visible.ndim != 2
            or min(visible.shape) < 2
            or not np.issubdtype(visible.dtype, np.floating)
        ):
            raise InputError(
                f"an occlusion's visible is an (S, S) float mask, got {visible.dtype} "
                f"{visible.shape}"
            )
        if matrix.shape != (2, 3) or not np.isfinite(matrix).all():
            raise InputError(f"an occlusion's matrix is a finite (2, 3) affine, got {matrix.shape}")
        object.__setattr__(self, "visible", np.ascontiguousarray(visible, np.float32))
        object.__setattr__(self, "matrix", matrix.astype(np.float64))

    def in_crop(self, to_frame: NDArray[np.floating], size: tuple[int, int]) -> NDArray[np.float32]:
        """``visible`` in another crop of the frame: ``to_frame`` (2, 3) takes that crop's
        pixels to the frame's, ``size`` is its (width, height). Outside what the
        occluder saw the face counts as seen (1)."""
        to_frame = np.asarray(to_frame, np.float64)
        linear = self.matrix[:, :2] @ to_frame[:, :2]
        shift = self.matrix[:, :2] @ to_frame[:, 2] + self.matrix[:, 2]
        warped = cv2.warpAffine(
            self.visible,
            np.hstack([linear, shift[:, None]]),
            size,
            flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=1.0,
        )
        return np.asarray(warped, np.float32)

    def cover(
        self, face: Face, shape: tuple[int, ...]
    ) -> tuple[tuple[slice, slice], NDArray[np.float32]] | None:
        """Where the frame (of ``shape``) shows something in front of ``face``: the box
        (row and column slices) round the face's own area and, in it, (h, w, 1) how
        much is covered (0..1); None where nothing is. Only the face's own area
        (its mesh's outline, grown by FACE_AREA_GROWTH) counts: the crop shows its
        neighbours too, which are no part of this face to keep."""
        h, w = shape[:2]
        hull = cv2.convexHull(face.landmarks_478[:, :2].astype(np.float32)).reshape(-1, 2)
        middle = hull.mean(axis=0)
        hull = middle + (hull - middle) * np.float32(1.0 + FACE_AREA_GROWTH)
        x0, y0 = np.maximum(np.floor(hull.min(axis=0)).astype(int), 0)
        x1 = min(w, int(np.ceil(hull[:, 0].max())) + 1)
        y1 = min(h, int(np.ceil(hull[:, 1].max())) + 1)
        if x1 - x0 < 2 or y1 - y0 < 2:
            return None
        to_frame = np.array([[1.0, 0.0, x0], [0.0, 1.0, y0]])
        covered = 1.0 - self.in_crop(to_frame, (x1 - x0, y1 - y0))
        area = np.zeros((y1 - y0, x1 - x0), np.uint8)
        corners = np.round((hull - (x0, y0)) * 16).astype(np.int32)
        cv2.fillConvexPoly(area, corners, 1, cv2.LINE_AA, 4)
        covered *= area
        if not covered.any():
            return None
        return (slice(y0, y1), slice(x0, x1)), covered[:, :, None]


def lay_back(
    out: Frame, before: Frame, cover: tuple[tuple[slice, slice], NDArray[np.float32]]
) -> None:
    """Put ``before`` (the pixels of ``cover``'s box as they were) back into ``out`` (in
    place) where ``cover`` (from :meth:`Occlusion.cover`) says the face is covered."""
    box, covered = cover
    now = out[box].astype(np.float32)
    mixed = now + covered * (before.astype(np.float32) - now)
    out[box] = np.clip(mixed + 0.5, 0, 255).astype(np.uint8)


def _side(shape: list[Any], path: Path) -> tuple[int, bool]:
    """The square side S of the image input (0 where the file leaves it open) and
    whether its channels come last."""
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if len(dims) == 4 and dims[0] in (1, None):
        if dims[3] == 3 and dims[1] != 3:
            sides, last = dims[1:3], True
        elif dims[1] == 3:
            sides, last = dims[2:4], False
        else:
            sides, last = [], False
        if sides:
            if None not in sides and sides[0] != sides[1]:
                raise InputError(f"{path}: input {shape} is not square")
            side = sides[0] or sides[1] or 0  # 0: left open
            if 0 < side < 16:
                raise InputError(f"{path}: input {shape} is too small for a face")
            if side > OCCLUDER_MAX_SIZE:
                raise InputError(
                    f"{path}: input {shape} is over {OCCLUDER_MAX_SIZE} px a side: not a face "
                    "occluder"
                )
            return side, last
    raise InputError(f"{path}: input {shape}, expected [1, size, size, 3] or [1, 3, size, size]")


class Occluder(ABC):
    """Finds what covers a face: an ONNX face occluder (:class:`FaceOccluder`), a face
    parser keeping the regions asked for (:class:`~faceweave.FaceParser`), or several
    of them (:class:`Occluders`). Every engine and front end takes any of them."""

    @abstractmethod
    def occlusion(self, frame: Frame, face: Face) -> Occlusion | None:
        """What covers ``face`` in ``frame`` (see :class:`Occlusion`); None: nothing."""

    def for_source(self) -> Occluder | None:
        """The occluder a source photo is looked at with (None: none): what covers its
        face there. Itself by default; a choice of what to swap (a parser's regions,
        :class:`~faceweave.analysis.areas.FaceAreas`) is the target's, not the photo's."""
        return self


class Occluders(Occluder):
    """Several occluders as one: a pixel is seen where every one of them sees it (see
    :func:`merged`).

    Example:
        >>> xseg, parser = FaceOccluder("xseg.onnx"), FaceParser("bisenet.onnx")  # doctest: +SKIP
        >>> both = Occluders([xseg, parser])  # doctest: +SKIP
    """

    def __init__(self, occluders: Sequence[Occluder]) -> None:
        parts = list(occluders) if isinstance(occluders, Sequence) else []
        if not parts or not all(isinstance(o, Occluder) for o in parts):
            raise InputError(f"Occluders takes a list of one or more occluders, got {occluders!r}")
        self.parts = parts

    def for_source(self) -> Occluder | None:
        parts = [p for part in self.parts if (p := part.for_source()) is not None]
        if parts == self.parts:
            return self
        return None if not parts else parts[0] if len(parts) == 1 else Occluders(parts)

    def occlusion(self, frame: Frame, face: Face) -> Occlusion | None:
        """Every part's occlusion of ``face`` as one (None where none finds anything).

        Raises:
            BackendError: a part gives something else than an Occlusion or None.
        """
        found = [o for part in self.parts if (o := occlusion_of(part, frame, face)) is not None]
        return merged(found) if found else None


def occlusion_of(occluder: Occluder, frame: Frame, face: Face) -> Occlusion | None:
    """``occluder.occlusion(frame, face)``, checked: an occluder of your own that gives
    something else than an Occlusion or None is a :class:`BackendError`."""
    occlusion = occluder.occlusion(frame, face)
    if occlusion is not None and not isinstance(occlusion, Occlusion):
        raise BackendError(
            f"{type(occluder).__name__}.occlusion gave a {type(occlusion).__name__}, not an "
            "Occlusion or None"
        )
    return occlusion


def merged(occlusions: Sequence[Occlusion]) -> Occlusion:
    """One occlusion from several of one face: seen where all of them see the face,
    in the crop of the one that shows the most of the frame (a face parser's wide
    crop holds a fringe that an occluder's tight one cuts), at its size."""
    if not isinstance(occlusions, Sequence) or not occlusions:
        raise InputError(f"merged takes a list of one or more occlusions, got {occlusions!r}")
    for item in occlusions:
        if not isinstance(item, Occlusion):
            raise InputError(f"merged takes Occlusions, got a {type(item).__name__}")
    if len(occlusions) == 1:
        return occlusions[0]

    def reach(o: Occlusion) -> float:
        # The frame's area the crop shows: its side over the matrix's scale, squared.
        return o.visible.shape[0] * o.visible.shape[1] / abs(np.linalg.det(o.matrix[:, :2]))

    widest = max(occlusions, key=reach)
    h, w = widest.visible.shape
    to_frame = cv2.invertAffineTransform(widest.matrix)
    visible = widest.visible.copy()
    for other in occlusions:
        if other is not widest:
            visible *= other.in_crop(to_frame, (w, h))
    return Occlusion(visible, widest.matrix)


class FaceOccluder(Occluder):
    """Finds what covers each face with an ONNX occluder model (see the module).

    Args:
        model_path: the ``.onnx`` file (DeepFaceLab's XSeg exported to ONNX, as
            FaceFusion's ``xseg_1``, or a model with its signature).
        execution_provider: onnxruntime provider (``cpu``, ``cuda``...).

    Example:
        >>> occluder = FaceOccluder("xseg_1.onnx")  # doctest: +SKIP
        >>> swapper = fw.Swapper(source_face).with_occluder(occluder)  # doctest: +SKIP
    """

    def __init__(self, model_path: str | Path, *, execution_provider: str = "cpu") -> None:
        if not isinstance(model_path, (str, Path)):
            raise InputError(f"the occluder model is a .onnx file's path, got {model_path!r}")
        self.model = OnnxModel(
            model_path, inputs=(), outputs=None, execution_provider=execution_provider
        )
        path = self.model.path
        self.input_name, shape = self.model.single_input("face occluder")
        side, self.channels_last = _side(shape, path)
        declared = self.model.session.get_outputs()[0].shape
        # An input side left open takes the output's, if it gives one (else XSeg's 256).
        self.size = side or _mask_side(list(declared)) or OCCLUDER_SIZE
        kinds = {i.name: i.type for i in self.model.session.get_inputs()}
        kinds["the output"] = self.model.session.get_outputs()[0].type
        for name, kind in kinds.items():
            if kind not in _FLOAT_TYPES:
                raise InputError(f"{path}: {name} is {kind}, expected float32 or float16")
        self._half = kinds[self.input_name] == "tensor(float16)"
        if not _fits_mask(list(declared), self.size):
            raise InputError(
                f"{path}: output {list(declared)}, expected [1, {self.size}, {self.size}, 1], "
                f"[1, 1, {self.size}, {self.size}] or [1, {self.size}, {self.size}] (the mask)"
            )

    def run(self, crop: Frame) -> NDArray[np.float32]:
        """The model's raw visibility of one aligned ``size`` px BGR crop, (S, S) 0..1."""
        blob = crop.astype(np.float32) * np.float32(1.0 / 255.0)
        blob = blob[None] if self.channels_last else blob.transpose(2, 0, 1)[None]
        feeds = {
            self.input_name: np.ascontiguousarray(blob.astype(np.float16) if self._half else blob)
        }
        (value,) = self.model.run(feeds).values()
        if value.size != self.size * self.size:
            raise BackendError(
                f"{self.model.path.name}: output {list(value.shape)}, expected "
                f"{self.size} x {self.size} values"
            )
        if not np.isfinite(value).all():
            raise BackendError(
                f"{self.model.path.name}: the model's output is not finite (NaN or infinity)"
            )
        return np.clip(value.reshape(self.size, self.size), 0.0, 1.0).astype(np.float32)

    def occlusion(self, frame: Frame, face: Face) -> Occlusion:
        """What covers ``face`` in ``frame`` (see :class:`Occlusion`).

        Raises:
            InputError: ``frame`` is no uint8 (H, W, 3) image or ``face`` no Face.
            BackendError: the model fails or gives values that are not finite.
        """
        frame = checked_target(frame, face)
        matrix = alignment(face.landmarks_5, self.size)
        return ramped(self.run(aligned_crop(frame, matrix, self.size)), matrix)


def checked_target(frame: Frame, face: Face) -> Frame:
    """``frame`` checked (a uint8 (H, W, 3) image) for an occluder to look at ``face`` in.

    Raises:
        InputError: ``frame`` is no such image or ``face`` no Face.
    """
    frame = check_frame(frame)
    if not isinstance(face, Face):
        raise InputError(f"expected a Face, got {type(face).__name__}")
    return frame


def ramped(raw: NDArray[np.float32], matrix: NDArray[np.float64]) -> Occlusion:
    """A model's (S, S) visibility in its crop, smoothed (a Gaussian of S / 128 px) and
    ramped from covered under one half to seen at 1 (an occluder's own edge stays
    covered rather than a soft mix of both), as an Occlusion."""
    side = raw.shape[0]
    smooth = cv2.GaussianBlur(raw, (0, 0), max(0.5, OCCLUDER_SMOOTH * side))
    return Occlusion(np.clip((smooth - 0.5) * 2.0, 0.0, 1.0).astype(np.float32), matrix)


def checked_names(value: object, known: tuple[str, ...], kind: str) -> list[str]:
    """``value`` (a name or a list of them) as a list of names from ``known``, each once
    in the order given; ``kind`` names them in errors (``face region``...).

    Raises:
        InputError: not a list of one or more known names.
    """
    if isinstance(value, str):
        value = [value]
    listed = ", ".join(n for n in known if n != "all")
    if isinstance(value, (bytes, bytearray, dict)) or not isinstance(value, Iterable):
        raise InputError(f"{kind}s are a list of names from {listed}; got {value!r}")
    names = list(value)
    if not names:
        raise InputError(f"give one or more {kind}s from {listed}")
    for name in names:
        if not isinstance(name, str) or name not in known:
            more = " (or all)" if "all" in known else ""
            raise InputError(f"unknown face {kind} {name!r}: choose from {listed}{more}")
    return list(dict.fromkeys(names))


def _mask_side(declared: list[Any]) -> int:
    """The square side an output declared ``declared`` gives its mask (0: none given)."""
    known = [d if isinstance(d, int) and d > 0 else 0 for d in declared]
    for sides in (known[1:3], known[2:4]) if len(known) == 4 else (known[1:3],):
        if len(sides) == 2 and sides[0] == sides[1] and 16 <= sides[0] <= OCCLUDER_MAX_SIZE:
            return sides[0]
    return 0


def _fits_mask(declared: list[Any], size: int) -> bool:
    """Whether an output declared ``declared`` may hold one size x size mask."""
    known = [d if isinstance(d, int) and d > 0 else None for d in declared]
    return any(
        len(known) == len(layout)
        and all(k in (None, e) for k, e in zip(known, layout, strict=True))
        for layout in ([1, size, size, 1], [1, 1, size, size], [1, size, size])
    )
