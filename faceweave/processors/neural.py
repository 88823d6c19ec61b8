"""Neural models a user brings, run by onnxruntime: face swap and face enhancement
(faceweave ships and downloads no weights).

The embedded engine (:class:`~faceweave.Swapper`) needs no model file. A user who has
the files of InsightFace's ``inswapper_128`` (or a model with its signature) and of an
ArcFace recogniser (``w600k_r50``, the one it was trained with) can swap with them::

    swapper = NeuralSwapper(source_face, swapper_model="inswapper_128.onnx",
                            embedder_model="w600k_r50.onnx", fusion=0.7)
    out = swapper.swap(frame, faces)
    faceweave swap -s me.jpg -t poster.jpg -o out.png --engine inswapper \\
        --swapper-model inswapper_128.onnx --embedder-model w600k_r50.onnx

The models' contracts, checked when they load (another signature is one clear line):

* embedder: one input, float32 ``[1, 3, 112, 112]`` (a square side other than 112 is
  taken too), RGB scaled to ``(v - 127.5) / 127.5``, the face aligned by its five
  points to ArcFace's template; one output ``[1, E]``, the identity embedding.
* swapper: inputs ``target`` float32 (or float16) ``[1, 3, S, S]``, RGB in 0..1, the
  face aligned to the same template scaled to S (S = 128: 8 px to the right), and
  ``source`` ``[1, D]``; one output ``[1, 3, S, S]``, the swapped face, RGB in 0..1.
  ``source`` is the embedding mapped by the model's embedding map, the last (E, D)
  matrix among the file's initializers (not used by the graph itself), and scaled
  to unit length.

Around the model, faceweave's own steps: the face mask from the 478-point mesh (face
oval, ``mask_padding``, the mouth's opening kept with ``mask_mouth``, the lips with
``mask_lips``), feathered in
the aligned crop (which continues the frame beyond its edges); the colour
match (``color``: none, rct, lct) on that mask; the blend (``blend``: alpha,
multiband, poisson). ``pixel_boost`` n > 1 aligns the face at n*S px and runs the
model on the n*n interleaved S-px crops of it (every n-th pixel from each offset),
reassembled: more of a large face's detail survives, for n*n model runs.

Fusion: the model is asked for the identity ``(1 - f) * target + f * source`` (unit
embeddings, the sum scaled back to unit length), a blend of the two people in the
model's own identity space; below ``FUSION_FADE_IN`` the model's face also fades in
over the target's pixels, so that fusion 0 is the target exactly and small values
change it little.

A face enhancer (:class:`FaceEnhancer`: GFPGAN, GPEN-BFR, RestoreFormer or
CodeFormer exported to ONNX, as FaceFusion uses them) restores the swapped faces'
detail on top of either engine (:class:`EnhancedSwapper`), with an intensity::

    faceweave swap ... --enhancer-model gfpgan_1.4.onnx --enhancer-blend 0.8

* enhancer: one image input float32 ``[1, 3, S, S]`` (S = 512 usually), RGB scaled to
  -1..1, the face aligned by its five points to the FFHQ template at S px; an
  optional input ``weight`` (CodeFormer's fidelity, 0..1); one output
  ``[1, 3, S, S]``, the restored face, -1..1. It is pasted back through the mesh's
  face oval, feathered, at ``blend`` of its strength.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.hands import Hand
from faceweave.analysis.occluder import Occluder, Occlusion, lay_back
from faceweave.analysis.onnx_backend import OnnxModel, check_model_file
from faceweave.core import blend as blend_ops
from faceweave.core import color as color_ops
from faceweave.core.align import ARCFACE_TEMPLATE, aligned_crop, alignment, ffhq_alignment
from faceweave.core.facemodel import load_face_model
from faceweave.core.hands import hand_silhouette, keep_hands
from faceweave.errors import BackendError, InputError, NoFaceError, UsageError
from faceweave.processors.swap import (
    COLOR_GAIN_RANGE,
    COLOR_RIDGE,
    OUTER_LIPS,
    FaceSwapping,
    SwapOptions,
    Swapper,
    checked_hands,
    checked_occlusions,
    target_faces,
)
from faceweave.types import Face, Frame, is_real_number

__all__ = [
    "ARCFACE_TEMPLATE",
    "AnySwapper",
    "ArcFaceEmbedder",
    "EnhancedSwapper",
    "FaceEnhancer",
    "FUSION_FADE_IN",
    "NEURAL_COLOR_MODES",
    "PIXEL_BOOSTS",
    "NeuralSwapper",
    "SwapModel",
    "aligned_crop",
    "alignment",
    "checked_enhancer_number",
    "checked_pixel_boost",
    "load_models",
    "mesh_only_options",
    "oval_mask",
    "paste_back",
    "uses_creases",
]

logger = logging.getLogger(__name__)

# How much of the restored face an enhancer uses by default (FaceFusion's 80%).
ENHANCER_BLEND = 0.8
NEURAL_COLOR_MODES = ("none", "rct", "lct")
# The embedded engine's options, which this engine does not use: setting one is an error.
MESH_ONLY_OPTIONS = (
    "shape",
    "gaze",
    "mask_eyes",
    "mask_glasses",
    "detail",
    "light",
    "creases",
    "uv_size",
    "work_size",
    "process_size",
)
# The feather's ramp, from 0 at the mask's edge to 1 inside, is this many times
# ``feather`` times the crop's side (about where the old erode-and-blur reached 1), at
# most EDGE_RAMP_MAX of the way to the mask's middle: a wide feather keeps a core.
FEATHER_RAMP = 4.0
EDGE_RAMP_MAX = 0.8
# What the blend changes beyond an alpha blend fades out over this share of the crop's
# side towards the crop's border, where the crop (and the blend's context) ends.
CROP_TAPER = 0.06
# Below this fusion the model's face fades in over the target's pixels (see the module).
FUSION_FADE_IN = 0.2
PIXEL_BOOSTS = (1, 2, 3, 4)
# Frame pixels around the box of what the swap changes, pasted back too.
PASTE_MARGIN = 2


def _border_taper(size: int, width: float) -> NDArray[np.float32]:
    """(size, size) float32: 0 on the square's border, rising smoothly to 1 at
    ``width`` pixels inside it."""
    edge = np.minimum(np.arange(size), np.arange(size)[::-1]).astype(np.float32)
    t = np.minimum(edge / np.float32(max(width, 1.0)), 1.0)
    ramp = t * t * (3.0 - 2.0 * t)
    return np.minimum(ramp[:, None], ramp[None, :])


def _square_side(shape: list[Any], default: int, name: str, path: Path) -> int:
    """The side S of an input declared ``[1, 3, S, S]`` (``default`` where it is left open)."""
    dims = [d if isinstance(d, int) and d > 0 else None for d in shape]
    if len(dims) != 4 or dims[1] not in (3, None):
        raise InputError(f"{path}: input {name} is {shape}, expected [1, 3, size, size]")
    height, width = dims[2], dims[3]
    if height is not None and width is not None and height != width:
        raise InputError(f"{path}: input {name} is {shape}, expected a square [1, 3, size, size]")
    side = height or width or default
    if side < 16:
        raise InputError(f"{path}: input {name} is {shape}, too small for a face")
    return side


def _vector_size(shape: list[Any], name: str, path: Path) -> int:
    if len(shape) != 2 or not isinstance(shape[-1], int) or shape[-1] <= 0:
        raise InputError(f"{path}: {name} is {shape}, expected [1, size]")
    return int(shape[-1])


def _check_declared_face(model: OnnxModel, size: int) -> None:
    """The model's one output must be declared [1, 3, size, size] where it says a size."""
    declared = list(model.session.get_outputs()[0].shape)
    known = [d if isinstance(d, int) and d > 0 else None for d in declared]
    expected = [1, 3, size, size]
    if len(known) != 4 or any(k not in (None, e) for k, e in zip(known, expected, strict=True)):
        raise InputError(f"{model.path}: output {declared}, expected {expected} (the face)")


def _face_bgr(
    value: NDArray[np.float32], model: OnnxModel, size: int, *, low: float
) -> NDArray[np.float32]:
    """A model's (1, 3, size, size) RGB face in ``low``..1 as BGR float32 0..255."""
    if value.shape != (1, 3, size, size):  # declared otherwise, or not at all
        raise BackendError(
            f"{model.path.name}: output {list(value.shape)}, expected [1, 3, {size}, {size}]"
        )
    if not np.isfinite(value).all():
        raise BackendError(f"{model.path.name}: the model's output is not finite (NaN or infinity)")
    rgb = (value[0].transpose(1, 2, 0) - low) * (255.0 / (1.0 - low))
    return np.ascontiguousarray(np.clip(rgb[:, :, ::-1], 0.0, 255.0), dtype=np.float32)


# onnxruntime's names of the element types the models' inputs and outputs may have.
_FLOAT_TYPES = ("tensor(float)", "tensor(float16)")


def _check_types(model: OnnxModel, allowed: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """Each named input (and ``output``, the first output) of one of its allowed element
    types; their types, by name."""
    types = {i.name: i.type for i in model.session.get_inputs()}
    types["output"] = model.session.get_outputs()[0].type
    for name, kinds in allowed.items():
        if name in types and types[name] not in kinds:
            raise InputError(
                f"{model.path}: {name} is {types[name]}, expected {' or '.join(kinds)}"
            )
    return types


def checked_enhancer_number(
    name: str, value: object, high: float, *, kind: str = "enhancer"
) -> float:
    """``value`` as a float in 0..high (numpy numbers too), or a UsageError naming it
    as ``kind``'s ``name``."""
    if isinstance(value, bool | np.bool_) or not isinstance(
        value, int | float | np.integer | np.floating
    ):
        raise UsageError(f"{kind} {name} must be a number, got {value!r}")
    if not 0.0 <= float(value) <= high:
        raise UsageError(f"{kind} {name} must be within [0, {high:g}], got {value}")
    return float(value)


def checked_pixel_boost(value: object) -> int:
    """``value`` as a pixel boost (one of PIXEL_BOOSTS), or a UsageError."""
    if isinstance(value, bool) or value not in PIXEL_BOOSTS:
        raise UsageError(
            f"pixel_boost must be one of {', '.join(map(str, PIXEL_BOOSTS))}, got {value!r}"
        )
    return int(value)  # type: ignore[call-overload]


def _unit(vector: NDArray[np.floating]) -> NDArray[np.float32]:
    norm = float(np.linalg.norm(vector))
    if not np.isfinite(norm) or norm <= 1e-12:  # an embedder that misbehaves
        raise BackendError("the identity embedding is zero or not finite")
    return (np.asarray(vector, np.float64) / norm).astype(np.float32)


def oval_mask(
    face: Face,
    matrix: NDArray[np.float64],
    size: int,
    *,
    feather: float,
    padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0),
    mouth: bool = False,
    lips: bool = False,
) -> NDArray[np.float32]:
    """(size, size) float32 mask in an aligned crop (``matrix`` takes frame pixels to
    it): the face's mesh oval less ``padding`` (top, right, bottom, left fractions of
    the oval's height and width), with ``mouth`` the mouth's opening and with ``lips``
    the lips (their outer contour, the opening inside it); feathered
    inward from the oval's edge over ``FEATHER_RAMP * feather * size`` pixels, eased,
    at most EDGE_RAMP_MAX of the way to its middle (a core always stays)."""
    model = load_face_model()
    points = face.landmarks_478[:, :2].astype(np.float64) @ matrix[:, :2].T + matrix[:, 2]
    shift = 4  # sub-pixel polygon corners: 1/16 px
    hard = np.zeros((size, size), np.uint8)
    oval = model.face_oval_polygon(points)
    cv2.fillPoly(hard, [np.round(oval * (1 << shift)).astype(np.int32)], 255, cv2.LINE_AA, shift)
    x0, y0 = oval.min(axis=0)
    x1, y1 = oval.max(axis=0)
    top, right, bottom, left = padding
    if any(padding):
        keep = np.zeros_like(hard)
        keep[
            max(0, round(y0 + top * (y1 - y0))) : max(0, round(y1 - bottom * (y1 - y0))),
            max(0, round(x0 + left * (x1 - x0))) : max(0, round(x1 - right * (x1 - x0))),
        ] = 255
        hard = np.minimum(hard, keep)
    # Feathered inward from the oval's (and the padding's) edge: 0 there, 1 from a
    # ramp's width inside, eased. The frame's edge is no edge of the face: the crop
    # continues the frame beyond it, and the mask goes on there.
    distance = cv2.distanceTransform((hard >= 128).astype(np.uint8), cv2.DIST_L2, 5)
    ramp = min(FEATHER_RAMP * feather * size, EDGE_RAMP_MAX * float(distance.max()))
    t = np.minimum(distance / np.float32(max(ramp, 1.0)), 1.0)
    soft = t * t * (3.0 - 2.0 * t)

    def give_back(ring: NDArray[np.float64], sigma: float) -> None:
        """Give the target back what lies inside ``ring``, its edge blurred by ``sigma``."""
        inside = np.zeros_like(hard)
        corners = np.round(ring * (1 << shift)).astype(np.int32)
        cv2.fillPoly(inside, [corners], 255, cv2.LINE_AA, shift)
        soft[...] *= 1.0 - cv2.GaussianBlur(inside.astype(np.float32) / 255.0, (0, 0), sigma)

    if mouth:
        # The target's mouth opening (teeth, tongue), cut with an edge of about a
        # pixel: the lips around it are the model's.
        give_back(points[model.loops[2]], 0.5)
    if lips:
        # The target's own lips, their edge softened over about a hundredth of the crop
        # (a pixel at the model's 128).
        give_back(points[list(OUTER_LIPS)], max(0.5, 0.008 * size))
    return np.clip(soft, 0.0, 1.0).astype(np.float32)


def paste_back(
    out: Frame,
    face: NDArray[np.float32],
    crop: Frame,
    mask: NDArray[np.float32],
    matrix: NDArray[np.float64],
    blend: str,
) -> None:
    """Put a model's ``face`` (BGR float32, in the aligned ``crop`` that ``matrix``
    took from ``out``) back into ``out``, in place, where ``mask`` says.

    The blend runs in the crop, where the model's face is at its own resolution;
    what it changes beyond an alpha blend there (multiband: the seam's low
    frequencies over a wide band; poisson: the whole face's gradient fit) goes back
    into the frame as a correction to a full-resolution alpha paste, faded out
    towards the crop's border (else a multiband's wide band stops at a straight
    line), so the frame keeps its own pixels wherever the face does not cover them."""
    size = crop.shape[0]
    correction = None
    if blend != "alpha":
        blended = blend_ops.blend(face, crop, mask, mode=blend)
        weight = mask[:, :, None]
        correction = blended.astype(np.float32) - (face * weight + crop * (1.0 - weight))
        correction *= _border_taper(size, CROP_TAPER * size)[:, :, None]
    # Warped back by the inverse: only the box (in the frame) of what changes.
    inverse = cv2.invertAffineTransform(matrix)
    reach = mask > 0
    if correction is not None:
        reach |= np.abs(correction).max(axis=2) >= 0.5
    bx, by, bw, bh = cv2.boundingRect(reach.astype(np.uint8))
    corners = np.array([[bx, by], [bx + bw, by], [bx, by + bh], [bx + bw, by + bh]], np.float64)
    placed = corners @ inverse[:, :2].T + inverse[:, 2]
    h, w = out.shape[:2]
    x0, y0 = np.floor(placed.min(axis=0)).astype(int) - PASTE_MARGIN
    x1, y1 = np.ceil(placed.max(axis=0)).astype(int) + PASTE_MARGIN
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return
    inverse[:, 2] -= (x0, y0)
    region = (x1 - x0, y1 - y0)

    def back(image: NDArray[np.float32], border: int = cv2.BORDER_CONSTANT) -> NDArray[np.float32]:
        warped = cv2.warpAffine(image, inverse, region, flags=cv2.INTER_LINEAR, borderMode=border)
        return np.asarray(warped, np.float32)

    roi = out[y0:y1, x0:x1]
    weight_roi = back(mask)[:, :, None]
    result = roi.astype(np.float32)
    # The face continued past the crop's edge: where the mask reaches that edge (a
    # chin at the crop's bottom), no black is interpolated in with it.
    result += weight_roi * (back(face, cv2.BORDER_REPLICATE) - result)
    if correction is not None:
        result += back(correction)
    out[y0:y1, x0:x1] = np.clip(result + 0.5, 0, 255).astype(np.uint8)


class ArcFaceEmbedder:
    """Unit identity embeddings from an ArcFace-style ONNX recogniser (see the module).

    Args:
        model_path: the ``.onnx`` file (InsightFace's ``w600k_r50`` or one with its
            signature).
        execution_provider: onnxruntime provider (``cpu``, ``cuda``...).
    """

    def __init__(self, model_path: str | Path, *, execution_provider: str = "cpu") -> None:
        self.model = OnnxModel(
            model_path, inputs=(), outputs=None, execution_provider=execution_provider
        )
        path = self.model.path
        if len(self.model.input_shapes) != 1 or len(self.model.output_names) != 1:
            raise InputError(
                f"{path}: not an embedding model: it has {len(self.model.input_shapes)} "
                f"inputs and {len(self.model.output_names)} outputs, expected one of each"
            )
        ((self.input_name, shape),) = self.model.input_shapes.items()
        _check_types(self.model, {self.input_name: ("tensor(float)",), "output": _FLOAT_TYPES})
        self.size = _square_side(shape, 112, self.input_name, path)
        out_shape = self.model.session.get_outputs()[0].shape
        self.dim = _vector_size(list(out_shape), "its output", path)

    def preprocess(self, frame: Frame, points5: NDArray[np.floating]) -> NDArray[np.float32]:
        """(1, 3, size, size) float32: the aligned face, RGB, (v - 127.5) / 127.5."""
        crop = aligned_crop(frame, alignment(points5, self.size), self.size)
        rgb = crop[:, :, ::-1].astype(np.float32)
        return np.ascontiguousarray(((rgb - 127.5) / 127.5).transpose(2, 0, 1)[None])

    def embed(self, frame: Frame, points5: NDArray[np.floating]) -> NDArray[np.float32]:
        """The face's unit embedding, (E,) float32."""
        (value,) = self.model.run({self.input_name: self.preprocess(frame, points5)}).values()
        return _unit(value.reshape(-1))

    def embed_face(self, face: Face) -> NDArray[np.float32]:
        """The embedding of a face that carries its frame (as FaceAnalyser gives it)."""
        if face.frame is None:
            raise InputError("the face carries no frame to take its embedding from")
        return self.embed(face.frame, face.landmarks_5)


def _embedding_map(path: Path, rows: int, cols: int) -> NDArray[np.float32]:
    """The last (rows, cols) float matrix among the file's initializers."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:  # pragma: no cover - install problem
        raise InputError(f"reading {path.name}'s embedding map needs the onnx package") from exc
    try:
        graph = onnx.load(str(path), load_external_data=False).graph
    except Exception as exc:  # onnx raises protobuf's and its own errors
        raise InputError(f"{path}: not a readable ONNX model ({exc})") from exc
    for init in reversed(graph.initializer):
        if tuple(init.dims) == (rows, cols):
            try:  # weights kept in a side file (external data) are read beside the model
                value = numpy_helper.to_array(init, base_dir=str(path.parent))
            except Exception as exc:  # a side file that is missing or short
                raise InputError(f"{path}: its embedding map cannot be read ({exc})") from exc
            if np.issubdtype(value.dtype, np.floating) and np.isfinite(value).all():
                return np.asarray(value, np.float32)
    raise InputError(
        f"{path}: no {rows}x{cols} embedding map among its initializers: not an "
        "inswapper-style model, or not for this embedder"
    )


class SwapModel:
    """An inswapper-style ONNX model (see the module): aligned face plus identity in,
    swapped face out.

    Args:
        model_path: the ``.onnx`` file (``inswapper_128.onnx`` or one with its signature).
        embedding_size: the embedder's output size E (the embedding map's rows).
        execution_provider: onnxruntime provider.
    """

    def __init__(
        self, model_path: str | Path, *, embedding_size: int, execution_provider: str = "cpu"
    ) -> None:
        self.model = OnnxModel(
            model_path,
            inputs=("target", "source"),
            outputs=None,
            execution_provider=execution_provider,
        )
        path = self.model.path
        if len(self.model.output_names) != 1:
            raise InputError(
                f"{path}: {len(self.model.output_names)} outputs, expected one (the face)"
            )
        self.size = _square_side(self.model.input_shapes["target"], 128, "target", path)
        self.latent_size = _vector_size(self.model.input_shapes["source"], "input source", path)
        _check_declared_face(self.model, self.size)
        types = _check_types(
            self.model, {"target": _FLOAT_TYPES, "source": _FLOAT_TYPES, "output": _FLOAT_TYPES}
        )
        self._half = types["target"] == "tensor(float16)"
        self._half_source = types["source"] == "tensor(float16)"
        self.emap = _embedding_map(path, embedding_size, self.latent_size)

    def latent(self, embedding: NDArray[np.floating]) -> NDArray[np.float32]:
        """The model's ``source`` input for a unit embedding: mapped, unit length."""
        return _unit(np.asarray(embedding, np.float64) @ self.emap).reshape(1, -1)

    def run(self, crop: Frame, latent: NDArray[np.float32]) -> NDArray[np.float32]:
        """The swapped face for one aligned ``size`` px BGR crop, BGR float32 0..255."""
        blob = (crop[:, :, ::-1].astype(np.float32) / 255.0).transpose(2, 0, 1)[None]
        feeds = {
            "target": np.ascontiguousarray(blob.astype(np.float16) if self._half else blob),
            "source": latent.astype(np.float16) if self._half_source else latent,
        }
        (face,) = self.model.run(feeds).values()
        return _face_bgr(face, self.model, self.size, low=0.0)

    def run_boosted(
        self, crop: Frame, latent: NDArray[np.float32], boost: int
    ) -> NDArray[np.float32]:
        """The swapped face of a ``boost * size`` px crop: each of its boost^2 interleaved
        ``size`` px crops (every boost-th pixel from one offset) swapped, reassembled."""
        if boost == 1:
            return self.run(crop, latent)
        out = np.empty((*crop.shape[:2], 3), np.float32)
        for dy in range(boost):
            for dx in range(boost):
                part = np.ascontiguousarray(crop[dy::boost, dx::boost])
                out[dy::boost, dx::boost] = self.run(part, latent)
        return out


def mesh_only_options(options: SwapOptions) -> list[str]:
    """The embedded engine's options that ``options`` sets to other than their defaults."""
    defaults = SwapOptions()
    return [n for n in MESH_ONLY_OPTIONS if getattr(options, n) != getattr(defaults, n)]


def load_models(
    swapper_model: str | Path | SwapModel,
    embedder_model: str | Path | ArcFaceEmbedder,
    *,
    execution_provider: str = "cpu",
) -> tuple[SwapModel, ArcFaceEmbedder]:
    """The swap model and the embedder, each loaded from its file unless given loaded,
    checked to belong together (the model's embedding map takes the embedder's size)."""
    for name, given in (("swapper_model", swapper_model), ("embedder_model", embedder_model)):
        if not isinstance(given, (str, Path, SwapModel, ArcFaceEmbedder)):
            raise InputError(f"{name} is a .onnx file's path, got {type(given).__name__}")
    for given in (swapper_model, embedder_model):  # the swap model's file is named first
        if isinstance(given, str | Path):
            check_model_file(Path(given))
    embedder = (
        embedder_model
        if isinstance(embedder_model, ArcFaceEmbedder)
        else ArcFaceEmbedder(embedder_model, execution_provider=execution_provider)
    )
    if isinstance(swapper_model, SwapModel):
        if swapper_model.emap.shape[0] != embedder.dim:
            raise InputError(
                f"{swapper_model.model.path.name} takes {swapper_model.emap.shape[0]}-value "
                f"embeddings, {embedder.model.path.name} gives {embedder.dim}"
            )
        return swapper_model, embedder
    model = SwapModel(
        swapper_model, embedding_size=embedder.dim, execution_provider=execution_provider
    )
    return model, embedder


class NeuralSwapper(FaceSwapping):
    """Swaps (or fuses) one source identity onto target faces with ONNX models.

    Same use as :class:`~faceweave.Swapper` (``swap(frame, faces)``,
    ``with_options``), for the video and live pipelines too.

    Args:
        source_face: the source face (from :class:`~faceweave.FaceAnalyser`, carrying
            its frame), or several photos of the same person (their embeddings are
            averaged).
        swapper_model: the swap model's ``.onnx`` file (see the module), or the model
            loaded already (:func:`load_models`: several sources share one).
        embedder_model: the recogniser's ``.onnx`` file, or the one loaded already.
        execution_provider: onnxruntime provider for both.
        pixel_boost: 1 (the model's own size) to 4 (see the module).
        **options: swap options (:class:`~faceweave.SwapOptions`). This engine uses
            ``fusion``, ``color`` (none, rct, lct), ``blend``, ``feather``,
            ``mask_mouth``, ``mask_lips`` and ``mask_padding``; the others belong to the embedded
            engine, and setting one is a UsageError.
    """

    def __init__(
        self,
        source_face: Face | Sequence[Face],
        *,
        swapper_model: str | Path | SwapModel,
        embedder_model: str | Path | ArcFaceEmbedder,
        execution_provider: str = "cpu",
        pixel_boost: int = 1,
        **options: object,
    ) -> None:
        self.options = self._checked(SwapOptions.from_kwargs(options))
        self.pixel_boost = checked_pixel_boost(pixel_boost)
        given: list[object] = (
            list(source_face) if isinstance(source_face, (list, tuple)) else [source_face]
        )
        if not given or any(p is None for p in given):
            raise NoFaceError("no source face given")
        photos: list[Face] = []
        for photo in given:
            if not isinstance(photo, Face):
                raise InputError(
                    "the neural engine takes source faces from FaceAnalyser.get_faces "
                    f"(or fw.get_one_face), got {type(photo).__name__}"
                )
            photos.append(photo)
        self.model, self.embedder = load_models(
            swapper_model, embedder_model, execution_provider=execution_provider
        )
        self.source_embedding = _unit(
            np.mean([self.embedder.embed_face(p) for p in photos], axis=0)
        )
        self.source_faces = tuple(photos)
        self._source_latent = self.model.latent(self.source_embedding)

    @staticmethod
    def _checked(options: SwapOptions) -> SwapOptions:
        if options.color not in NEURAL_COLOR_MODES:
            raise UsageError(
                f"colour mode {options.color!r} is the embedded engine's; the neural engine "
                f"takes {', '.join(NEURAL_COLOR_MODES)}"
            )
        mesh_only = mesh_only_options(options)
        if mesh_only:
            raise UsageError(
                f"{', '.join(mesh_only)}: the embedded engine's, not used by the neural engine"
            )
        return options

    def with_options(self, **changes: object) -> NeuralSwapper:
        """A swapper with some options changed, sharing the loaded models and source."""
        other = object.__new__(NeuralSwapper)
        other.__dict__.update(self.__dict__)
        if "pixel_boost" in changes:
            other.pixel_boost = checked_pixel_boost(changes.pop("pixel_boost"))
        other.options = self._checked(SwapOptions.from_kwargs({**self.options.__dict__, **changes}))
        return other

    def latent_for(self, frame: Frame, target_face: Face) -> NDArray[np.float32]:
        """The model's identity input for this target: the source's, or at fusion below 1
        the unit blend of the target's own embedding and the source's."""
        fusion = self.options.fusion
        if fusion >= 1.0:
            return self._source_latent
        own = self.embedder.embed(frame, target_face.landmarks_5)
        return self.model.latent(_unit((1.0 - fusion) * own + fusion * self.source_embedding))

    def face_mask(
        self, target_face: Face, matrix: NDArray[np.float64], size: int
    ) -> NDArray[np.float32]:
        """(size, size) float32 mask in the aligned crop (see :func:`oval_mask`), with
        this swapper's feather, padding, mouth and lips."""
        opts = self.options
        return oval_mask(
            target_face,
            matrix,
            size,
            feather=opts.feather,
            padding=opts.mask_padding,
            mouth=opts.mask_mouth,
            lips=opts.mask_lips,
        )

    def _swap_into(
        self,
        out: Frame,
        target_face: Face,
        hands: Sequence[Hand] = (),
        occlusion: Occlusion | None = None,
    ) -> None:
        opts = self.options
        size = self.model.size * self.pixel_boost
        points = target_face.landmarks_5
        matrix = alignment(points, size)
        crop = aligned_crop(out, matrix, size)
        face = self.model.run_boosted(crop, self.latent_for(out, target_face), self.pixel_boost)
        # The mask at the model's own size (a boosted crop's is that one scaled up).
        mask = self.face_mask(target_face, alignment(points, self.model.size), self.model.size)
        if self.pixel_boost > 1:
            mask = cv2.resize(mask, (size, size), interpolation=cv2.INTER_LINEAR)
        mask *= min(1.0, opts.fusion / FUSION_FADE_IN)
        for hand in hands:
            # A hand in front of the face (mask_hands) is no part of it: neither pasted
            # over nor measured for the colour match (it is laid back afterwards).
            at = cv2.transform(hand.landmarks.reshape(1, -1, 2).astype(np.float64), matrix)[0]
            mask *= 1.0 - hand_silhouette(at, (size, size))
        if occlusion is not None:
            # What the occluder finds in front of the face, likewise.
            mask *= occlusion.in_crop(cv2.invertAffineTransform(matrix), (size, size))
        if not mask.any():
            return
        if opts.color != "none":
            on_face = mask >= 0.5
            if on_face.sum() >= 16:
                face = color_ops.color_transfer(
                    face,
                    crop,
                    source_mask=on_face.astype(np.float32),
                    target_mask=on_face.astype(np.float32),
                    mode=opts.color,
                    gain_range=COLOR_GAIN_RANGE,
                    ridge=COLOR_RIDGE if opts.color == "lct" else 0.0,
                )
        paste_back(out, face, crop, mask, matrix, opts.blend)


class FaceEnhancer:
    """Restores faces with an ONNX face restoration model a user brings (see the module).

    Args:
        model_path: the ``.onnx`` file (GFPGAN 1.4, GPEN-BFR-512, CodeFormer...).
        execution_provider: onnxruntime provider.
        blend: how much of the restored face is used, 0..1 (FaceFusion's default 0.8).
        weight: CodeFormer's fidelity input, 0..1 (used when the model has one).
        feather: the mask's soft edge (as :class:`~faceweave.SwapOptions`'s).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        execution_provider: str = "cpu",
        blend: float = ENHANCER_BLEND,
        weight: float = 1.0,
        feather: float = 0.03,
    ) -> None:
        self.blend = checked_enhancer_number("blend", blend, 1.0)
        self.feather = checked_enhancer_number("feather", feather, 0.5)
        fidelity = checked_enhancer_number("weight", weight, 1.0)
        if not isinstance(model_path, (str, Path)):
            raise InputError(f"the enhancer model is a .onnx file's path, got {model_path!r}")
        self.model = OnnxModel(
            model_path, inputs=(), outputs=None, execution_provider=execution_provider
        )
        path = self.model.path
        images = [n for n in self.model.input_shapes if n != "weight"]
        if len(images) != 1 or len(self.model.output_names) != 1:
            raise InputError(
                f"{path}: not a face restoration model: expected one image input (and an "
                f"optional 'weight') and one output, got inputs {list(self.model.input_shapes)} "
                f"and outputs {self.model.output_names}"
            )
        self.input_name = images[0]
        self.size = _square_side(self.model.input_shapes[self.input_name], 512, "input", path)
        _check_declared_face(self.model, self.size)
        types = _check_types(
            self.model,
            {
                self.input_name: _FLOAT_TYPES,
                "weight": (*_FLOAT_TYPES, "tensor(double)"),
                "output": _FLOAT_TYPES,
            },
        )
        self._weight: dict[str, NDArray[Any]] = {}
        if "weight" in self.model.input_shapes:
            kind = {"tensor(double)": np.float64, "tensor(float16)": np.float16}.get(
                types["weight"], np.float32
            )
            shape = self.model.input_shapes["weight"]
            dims = [d if isinstance(d, int) and d > 0 else 1 for d in shape]
            self._weight = {"weight": np.full(dims, fidelity, kind)}
        elif fidelity != 1.0:
            logger.warning(
                "%s has no 'weight' input (CodeFormer's fidelity): the weight %g is not used",
                path.name,
                fidelity,
            )
        self._half = types[self.input_name] == "tensor(float16)"

    def with_feather(self, feather: float) -> FaceEnhancer:
        """The same enhancer (sharing its loaded model) with another mask feather."""
        if feather == self.feather:
            return self
        other = object.__new__(FaceEnhancer)
        other.__dict__.update(self.__dict__)
        other.feather = checked_enhancer_number("feather", feather, 0.5)
        return other

    def matrix(self, face: Face) -> NDArray[np.float64]:
        """The similarity taking the face to the FFHQ template at the model's size."""
        return ffhq_alignment(face.landmarks_5, self.size)

    def run(self, crop: Frame) -> NDArray[np.float32]:
        """The restored face of one aligned crop, BGR float32 0..255."""
        blob = (crop[:, :, ::-1].astype(np.float32) / 127.5 - 1.0).transpose(2, 0, 1)[None]
        feeds = {
            self.input_name: np.ascontiguousarray(blob.astype(np.float16) if self._half else blob)
        }
        (face,) = self.model.run({**feeds, **self._weight}).values()
        return _face_bgr(face, self.model, self.size, low=-1.0)

    def enhance(self, frame: Frame, faces: list[Face] | Face, *, strength: float = 1.0) -> Frame:
        """The frame with every given face restored, at ``blend`` times ``strength``; a
        new frame."""
        if not is_real_number(strength) or not math.isfinite(strength):  # (NaN had passed)
            raise UsageError(f"strength must be a finite number, got {strength!r}")
        targets = target_faces(frame, faces)
        out = frame.copy()
        amount = self.blend * min(max(float(strength), 0.0), 1.0)
        if amount <= 0.0:
            return out
        for face in targets:
            matrix = self.matrix(face)
            crop = aligned_crop(out, matrix, self.size)
            restored = self.run(crop)
            mask = oval_mask(face, matrix, self.size, feather=self.feather) * amount
            paste_back(out, restored, crop, mask, matrix, "alpha")
        return out


class EnhancedSwapper:
    """A swapper (either engine) whose swapped faces a :class:`FaceEnhancer` restores;
    used as a swapper (``swap``, ``options``, ``with_options``) by every front end.
    The restoration fades in with the swap: at fusion 0 nothing is swapped or restored
    (the target comes back untouched), and below ``FUSION_FADE_IN`` it takes that
    share of its blend."""

    def __init__(self, swapper: Swapper | NeuralSwapper, enhancer: FaceEnhancer) -> None:
        if not isinstance(swapper, (Swapper, NeuralSwapper)):
            raise InputError(f"swapper is a Swapper or a NeuralSwapper, got {swapper!r}")
        if not isinstance(enhancer, FaceEnhancer):
            raise InputError(f"enhancer is a FaceEnhancer, got {enhancer!r}")
        self.swapper = swapper
        self.enhancer = enhancer

    @property
    def options(self) -> SwapOptions:
        return self.swapper.options

    def with_options(self, **changes: object) -> EnhancedSwapper:
        swapper = self.swapper.with_options(**changes)
        enhancer = self.enhancer
        if "feather" in changes:  # the restored face's mask follows the swap's
            enhancer = enhancer.with_feather(swapper.options.feather)
        return EnhancedSwapper(swapper, enhancer)

    def hands_near(self, frame: Frame, faces: list[Face] | Face) -> list[Hand]:
        """The hands round the given faces (the swapper's finder)."""
        return self.swapper.hands_near(frame, faces)

    @property
    def occluder(self) -> Occluder | None:
        return self.swapper.occluder

    def with_occluder(self, occluder: Occluder | None) -> EnhancedSwapper:
        """The same, its swapper with ``occluder`` (see FaceSwapping.with_occluder)."""
        return EnhancedSwapper(self.swapper.with_occluder(occluder), self.enhancer)

    def occlusions(self, frame: Frame, faces: list[Face] | Face) -> list[Occlusion | None]:
        return self.swapper.occlusions(frame, faces)

    def swap(
        self,
        frame: Frame,
        faces: list[Face] | Face,
        *,
        hands: Sequence[Hand] | None = None,
        occlusions: Sequence[Occlusion | None] | None = None,
    ) -> Frame:
        # With mask_hands the hands go back over the restored faces too: the enhancer
        # redraws its whole crop, fingers at the chin included; so with an occluder
        # does what covers each face.
        hands = checked_hands(hands)
        if self.options.mask_hands and hands is None and self.options.fusion > 0.0:
            hands = self.swapper.hands_near(frame, faces)
        targets = target_faces(frame, faces)
        if occlusions is not None:
            occlusions = checked_occlusions(occlusions, len(targets))
        elif self.options.fusion > 0.0:
            occlusions = self.swapper.occlusions(frame, targets)
        out = self.swapper.swap(frame, targets, hands=hands, occlusions=occlusions)
        strength = min(1.0, self.options.fusion / FUSION_FADE_IN)
        if strength <= 0.0:
            return out
        enhanced = self.enhancer.enhance(out, targets, strength=strength)
        for face, occlusion in zip(targets, occlusions or (), strict=True):
            cover = None if occlusion is None else occlusion.cover(face, frame.shape)
            if cover is not None:
                lay_back(enhanced, out[cover[0]], cover)
        if self.options.mask_hands and hands:
            keep_hands(enhanced, frame, [hand.landmarks for hand in hands])
        return enhanced


# A swapper of any engine, enhanced or not: the pipelines and front ends take them all.
AnySwapper = Swapper | NeuralSwapper | EnhancedSwapper


def uses_creases(swappers: Sequence[AnySwapper]) -> bool:
    """Whether a video's tracker must keep each face's skin at rest: some swapper lays
    the target's creases (the embedded engine's ``creases``; the neural engine has none)."""
    plain = [s.swapper if isinstance(s, EnhancedSwapper) else s for s in swappers]
    return any(isinstance(s, Swapper) and s.options.creases > 0 for s in plain)
