"""The whole frame upscaled by an ONNX super-resolution model a user brings (faceweave
ships no weights): FaceFusion's ``frame_enhancer`` (Real-ESRGAN, Real-HAT, ...).

The model's contract, checked when it loads (another signature is one clear line):

* one image input, float32 (or float16), ``[1, 3, H, W]``, RGB in 0..1; H and W left
  open (the frame is cut into tiles of 256 px) or fixed to a square tile's side T.
* one output, ``[1, 3, s H, s W]``, RGB in 0..1, for a whole scale s of 1 to 8: read
  from the file's shapes where they are fixed, else from one run on a small tile.

Around the model: the frame is cut into tiles that overlap by :data:`TILE_OVERLAP` px
on each side (reflected past the frame's edges), each tile's upscaled middle is kept,
so no tile's edge shows; the result is mixed with the frame resized by Lanczos at
``blend`` (FaceFusion's ``frame_enhancer_blend``, default 0.8). The output is s times
the frame's size.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.onnx_backend import OnnxModel
from faceweave.errors import BackendError, ImageTooLargeError, InputError, UsageError
from faceweave.processors.neural import checked_enhancer_number
from faceweave.types import Frame, check_frame

__all__ = ["FRAME_ENHANCER_BLEND", "FrameEnhancer"]

logger = logging.getLogger(__name__)

# How much of the model's frame is used by default (FaceFusion's 80%).
FRAME_ENHANCER_BLEND = 0.8
# The tile's side where the model leaves it open, and what each tile shares with its
# neighbours on each side (their upscaled middles are kept).
TILE_SIZE = 256
TILE_OVERLAP = 16
MAX_SCALE = 8
# A fixed tile keeps at least its middle half (a smaller one runs the model for few
# new pixels: a 33 px tile, for one).
MIN_FIXED_TILE = 4 * TILE_OVERLAP
# The largest output, in megapixels (a 4K frame at x4 is 133: refused, not swapped out).
MAX_OUTPUT_MEGAPIXELS = 64.0
_FLOAT_TYPES = ("tensor(float)", "tensor(float16)")


def _dim(value: Any) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


class FrameEnhancer:
    """Upscales whole frames with an ONNX super-resolution model (see the module).

    Args:
        model_path: the ``.onnx`` file (Real-ESRGAN x2/x4 exported to ONNX, as
            FaceFusion's ``real_esrgan_x4``, or a model with its signature).
        blend: how much of the model's frame is used, 0..1 (the rest: the frame
            resized by Lanczos).
        execution_provider: onnxruntime provider (``cpu``, ``cuda``...).
        max_megapixels: the largest output allowed.

    Example:
        >>> enhancer = FrameEnhancer("real_esrgan_x2.onnx")  # doctest: +SKIP
        >>> bigger = enhancer.enhance(swapped)  # doctest: +SKIP
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        blend: float = FRAME_ENHANCER_BLEND,
        execution_provider: str = "cpu",
        max_megapixels: float = MAX_OUTPUT_MEGAPIXELS,
    ) -> None:
        self.blend = checked_enhancer_number("blend", blend, 1.0, kind="frame enhancer")
        if isinstance(model_path, os.PathLike):
            model_path = Path(os.fspath(model_path))
        if not isinstance(model_path, (str, Path)):
            raise InputError(f"the frame enhancer model is a .onnx file's path, got {model_path!r}")
        if (
            isinstance(max_megapixels, bool | np.bool_)
            or not isinstance(max_megapixels, int | float | np.integer | np.floating)
            or not 0 < float(max_megapixels) < float("inf")
        ):
            raise UsageError(
                f"the frame enhancer's max_megapixels is a positive number, got {max_megapixels!r}"
            )
        self.max_megapixels = float(max_megapixels)
        self.model = OnnxModel(
            model_path, inputs=(), outputs=None, execution_provider=execution_provider
        )
        path = self.model.path
        self.input_name, shape = self.model.single_input("frame enhancer")
        dims = [_dim(d) for d in shape]
        if len(dims) != 4 or dims[0] not in (1, None) or dims[1] != 3:
            raise InputError(f"{path}: input {shape}, expected [1, 3, height, width] (RGB)")
        if dims[2] != dims[3] and None not in dims[2:]:
            raise InputError(f"{path}: input {shape}: a fixed tile must be square")
        fixed = dims[2] or dims[3]
        if fixed is not None and not MIN_FIXED_TILE <= fixed <= 2048:
            raise InputError(f"{path}: input {shape}: a fixed tile is {MIN_FIXED_TILE} to 2048 px")
        self.tile = fixed or TILE_SIZE
        self.fixed_tile = fixed is not None
        output = self.model.session.get_outputs()[0]
        kinds = {
            self.input_name: self.model.session.get_inputs()[0].type,
            "the output": output.type,
        }
        for name, kind in kinds.items():
            if kind not in _FLOAT_TYPES:
                raise InputError(f"{path}: {name} is {kind}, expected float32 or float16")
        self._half = kinds[self.input_name] == "tensor(float16)"
        out = [_dim(d) for d in output.shape]
        if len(out) != 4 or out[0] not in (1, None) or out[1] not in (3, None):
            raise InputError(
                f"{path}: output {list(output.shape)}, expected [1, 3, scale x height, "
                "scale x width] (RGB)"
            )
        declared = out[2] if fixed is not None else None
        self.scale = self._scale(declared)

    def _scale(self, declared: int | None) -> int:
        """The model's whole scale: from the declared output side over the fixed tile's,
        else from one run on a small tile."""
        path = self.model.path
        if declared is not None:
            side, out_side = self.tile, declared
        else:
            side = self.tile if self.fixed_tile else 2 * TILE_OVERLAP + 16
            try:
                out = self._run(np.zeros((side, side, 3), np.float32))
            except BackendError as exc:
                why = str(exc).removeprefix(f"{path.name}: ")
                raise InputError(f"{path}: not a frame enhancer: on a test tile, {why}") from None
            if out.shape[0] != out.shape[1]:
                raise InputError(
                    f"{path}: a {side} px square gives {out.shape[1]} x {out.shape[0]}: not "
                    "an upscaler"
                )
            out_side = out.shape[0]
        if out_side % side or not 1 <= out_side // side <= MAX_SCALE:
            raise InputError(
                f"{path}: a {side} px tile gives {out_side} px: expected a whole scale of "
                f"1 to {MAX_SCALE}"
            )
        return out_side // side

    def _run(self, tile: NDArray[np.float32]) -> NDArray[np.float32]:
        """The model's (sH, sW, 3) RGB 0..1 output for one (H, W, 3) RGB 0..1 tile."""
        blob = np.ascontiguousarray(tile.transpose(2, 0, 1)[None])
        (value,) = self.model.run(
            {self.input_name: blob.astype(np.float16) if self._half else blob}
        ).values()
        if value.ndim != 4 or value.shape[:2] != (1, 3):
            raise BackendError(
                f"{self.model.path.name}: output {list(value.shape)}, expected [1, 3, height, "
                "width]"
            )
        if not np.isfinite(value).all():
            raise BackendError(
                f"{self.model.path.name}: the model's output is not finite (NaN or infinity)"
            )
        return np.asarray(value[0].transpose(1, 2, 0), np.float32)

    def output_size(self, width: int, height: int) -> tuple[int, int]:
        """The (width, height) of a frame of that size, enhanced."""
        if not all(isinstance(v, int | np.integer) and v > 0 for v in (width, height)):
            raise InputError(
                f"a frame's size is two positive whole numbers, got {width!r}, {height!r}"
            )
        return int(width) * self.scale, int(height) * self.scale

    def check_size(self, width: int, height: int) -> None:
        """An ImageTooLargeError (an InputError) when a frame of that size, enhanced,
        would be over :attr:`max_megapixels` (checked before a frame's work, and by
        :meth:`enhance`)."""
        wide, high = self.output_size(width, height)
        if wide * high > self.max_megapixels * 1e6:
            raise ImageTooLargeError(
                f"upscaled x{self.scale} it would be {wide} x {high} "
                f"({wide * high / 1e6:.3g} MP), over the {self.max_megapixels:.3g} MP limit"
            )

    def enhance(self, frame: Frame) -> Frame:
        """``frame`` (uint8 BGR) upscaled by the model's scale, tile by tile, mixed with
        the frame resized by Lanczos at :attr:`blend`.

        Raises:
            InputError: ``frame`` is no uint8 (H, W, 3) image, or its output would be
                over ``max_megapixels``.
            BackendError: the model fails or gives values that are not finite, or a
                tile of another size than its scale's.
        """
        frame = check_frame(frame)
        h, w = frame.shape[:2]
        s = self.scale
        try:
            self.check_size(w, h)
        except InputError as exc:
            raise type(exc)(f"a {w} x {h} frame {exc}") from None
        plain = cv2.resize(frame, (w * s, h * s), interpolation=cv2.INTER_LANCZOS4)
        if self.blend == 0.0:
            return np.asarray(plain, np.uint8)
        rgb = frame[:, :, ::-1].astype(np.float32) * np.float32(1.0 / 255.0)
        pad, step = TILE_OVERLAP, self.tile - 2 * TILE_OVERLAP
        # The frame reflected past its edges, to whole tiles.
        rows, cols = -(-h // step), -(-w // step)
        bottom, right = rows * step - h + pad, cols * step - w + pad
        padded = cv2.copyMakeBorder(rgb, pad, bottom, pad, right, cv2.BORDER_REFLECT_101)
        out = np.empty((h * s, w * s, 3), np.uint8)
        for r in range(rows):
            for c in range(cols):
                y, x = r * step, c * step
                tile = padded[y : y + self.tile, x : x + self.tile]
                big = self._run(tile)
                if big.shape[:2] != (self.tile * s, self.tile * s):
                    raise BackendError(
                        f"{self.model.path.name}: a {self.tile} px tile gave "
                        f"{big.shape[1]} x {big.shape[0]}, not x{s}"
                    )
                high, wide = min(step, h - y), min(step, w - x)
                middle = big[pad * s : (pad + high) * s, pad * s : (pad + wide) * s, ::-1]
                # (Clipped before scaling: a huge finite value would overflow.)
                out[y * s : (y + high) * s, x * s : (x + wide) * s] = (
                    np.clip(middle, 0.0, 1.0) * 255.0 + 0.5
                ).astype(np.uint8)
        if self.blend == 1.0:
            return out
        return np.asarray(cv2.addWeighted(plain, 1.0 - self.blend, out, self.blend, 0.0), np.uint8)

    def enhance_with_alpha(
        self, frame: Frame, alpha: NDArray[np.uint8] | None
    ) -> tuple[Frame, NDArray[np.uint8] | None]:
        """:meth:`enhance`, and the frame's transparency (an (H, W) uint8 plane, or
        None) resized with it."""
        bigger = self.enhance(frame)
        if alpha is not None:
            size = (bigger.shape[1], bigger.shape[0])
            alpha = np.asarray(cv2.resize(alpha, size, interpolation=cv2.INTER_LINEAR), np.uint8)
        return bigger, alpha
