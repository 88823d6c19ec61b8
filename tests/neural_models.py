"""Tiny ONNX models with the signatures of an ArcFace recogniser and of inswapper, built
by the tests (no weights are downloaded or shipped). Importable as ``neural_models``:
tests/ is on sys.path under pytest."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _save(
    nodes: list,
    name: str,
    inputs: list,
    outputs: list,
    inits: list,
    path: Path,
    *,
    external: bool = False,
) -> Path:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    if external:
        onnx.save(
            model,
            str(path),
            save_as_external_data=True,
            location=path.name + ".data",
            size_threshold=1024,  # the weights; not the small shape tensor
        )
    else:
        onnx.save(model, str(path))
    return path


def tiny_embedder(path: Path, *, size: int = 112, dim: int = 512, seed: int = 0) -> Path:
    """ArcFace's signature: input ``input.1`` [1, 3, size, size] -> output [1, dim]: the
    image's 8 x 8 grid of mean colours, projected by a fixed random matrix."""
    cell = size // 8
    weights = np.random.default_rng(seed).standard_normal((3 * 64, dim)).astype(np.float32)
    nodes = [
        helper.make_node(
            "AveragePool", ["input.1"], ["pooled"], kernel_shape=[cell, cell], strides=[cell, cell]
        ),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("MatMul", ["flat", "w"], ["embedding"]),
    ]
    return _save(
        nodes,
        "tiny_arcface",
        [helper.make_tensor_value_info("input.1", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, dim])],
        [numpy_helper.from_array(weights, "w")],
        path,
    )


def tiny_swapper(
    path: Path,
    *,
    size: int = 128,
    dim: int = 512,
    seed: int = 1,
    tint: float = 0.0,
    with_emap: bool = True,
    output_size: int | None = None,
    external: bool = False,
) -> tuple[Path, np.ndarray | None, np.ndarray]:
    """inswapper's signature: inputs ``target`` [1, 3, size, size] and ``source`` [1, dim]
    -> ``output`` [1, 3, size, size] = target * (1 - tint) + tint * colour(source), where
    colour(source) = sigmoid(2 * source @ P) per channel (P fixed, random). The last
    initializer is a random (dim, dim) embedding map, not used by the graph, as
    inswapper's. ``output_size``: declare the output that size (a wrong signature);
    ``external``: keep the weights in a side file beside the model (ONNX external data).
    Returns the path, that map (None without one) and P."""
    rng = np.random.default_rng(seed)
    project = rng.standard_normal((dim, 3)).astype(np.float32)
    emap = rng.standard_normal((dim, dim)).astype(np.float32) / np.sqrt(dim)
    inits = [
        numpy_helper.from_array(project, "p"),
        numpy_helper.from_array(np.array(2.0, np.float32), "gain"),
        numpy_helper.from_array(np.array(1.0 - tint, np.float32), "keep"),
        numpy_helper.from_array(np.array(tint, np.float32), "tint"),
        numpy_helper.from_array(np.array([1, 3, 1, 1], np.int64), "shape"),
    ]
    if with_emap:
        inits.append(numpy_helper.from_array(emap, "emap"))
    nodes = [
        helper.make_node("MatMul", ["source", "p"], ["proj"]),
        helper.make_node("Mul", ["proj", "gain"], ["scaled"]),
        helper.make_node("Sigmoid", ["scaled"], ["colour"]),
        helper.make_node("Reshape", ["colour", "shape"], ["colour4"]),
        helper.make_node("Mul", ["colour4", "tint"], ["painted"]),
        helper.make_node("Mul", ["target", "keep"], ["kept"]),
        helper.make_node("Add", ["kept", "painted"], ["face"]),
    ]
    if output_size and output_size != size:  # a model of another size: pooled down
        step = size // output_size
        nodes.append(
            helper.make_node(
                "AveragePool", ["face"], ["output"], kernel_shape=[step, step], strides=[step, step]
            )
        )
    else:
        nodes.append(helper.make_node("Identity", ["face"], ["output"]))
    side = output_size or size
    _save(
        nodes,
        "tiny_inswapper",
        [
            helper.make_tensor_value_info("target", TensorProto.FLOAT, [1, 3, size, size]),
            helper.make_tensor_value_info("source", TensorProto.FLOAT, [1, dim]),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, side, side])],
        inits,
        path,
        external=external,
    )
    return path, emap if with_emap else None, project


def tiny_enhancer(
    path: Path,
    *,
    size: int = 512,
    scale: float = 1.0,
    shift: float = 0.0,
    weight_input: bool = False,
    weight_type: int = TensorProto.DOUBLE,
    image_inputs: int = 1,
) -> Path:
    """A face restoration model's signature (GFPGAN's; with ``weight_input``,
    CodeFormer's extra ``weight`` [1], double unless ``weight_type`` says): input
    ``input`` [1, 3, size, size] in -1..1 -> ``output`` = input * scale + shift (times
    the weight when it has one).
    ``image_inputs`` 2 gives it a second image input (a wrong signature)."""
    inits = [
        numpy_helper.from_array(np.array(scale, np.float32), "scale"),
        numpy_helper.from_array(np.array(shift, np.float32), "shift"),
    ]
    nodes = [
        helper.make_node("Mul", ["input", "scale"], ["scaled"]),
        helper.make_node("Add", ["scaled", "shift"], ["restored"]),
    ]
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])]
    if weight_input:
        inputs.append(helper.make_tensor_value_info("weight", weight_type, [1]))
        nodes += [
            helper.make_node("Cast", ["weight"], ["weight32"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["restored", "weight32"], ["output"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["restored"], ["output"]))
    if image_inputs == 2:
        inputs.append(
            helper.make_tensor_value_info("input2", TensorProto.FLOAT, [1, 3, size, size])
        )
        nodes.append(helper.make_node("Identity", ["input2"], ["unused"]))
    return _save(
        nodes,
        "tiny_enhancer",
        inputs,
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 3, size, size])],
        inits,
        path,
    )


# Green: the colour the tiny occluder takes for something in front of the face.
OCCLUDER_GREEN = (0, 255, 0)


def green_patch(frame: np.ndarray, face, radius: float = 0.12) -> tuple[np.ndarray, np.ndarray]:
    """``frame`` with a green disc (what the tiny occluder takes for something in front of
    the face) on the face's left cheek (image left), ``radius`` of the face's size, and
    the disc's mask (bool)."""
    import cv2

    centre = face.landmarks_478[205, :2]  # the cheek below the image-left eye
    out = frame.copy()
    disc = np.zeros(frame.shape[:2], np.uint8)
    cv2.circle(disc, tuple(int(v) for v in centre), int(radius * face.size), 1, -1)
    out[disc > 0] = OCCLUDER_GREEN
    return out, disc.astype(bool)


def changed(a: np.ndarray, b: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Each pixel's largest channel difference between ``a`` and ``b`` at ``where``."""
    return np.abs(a[where].astype(int) - b[where].astype(int)).max(axis=1)


def face_away(
    face, shape: tuple[int, ...], *discs: np.ndarray, edge: int = 25, clear: int = 21
) -> np.ndarray:
    """The face's mesh area (its hull eroded by an ``edge`` px square), clear of the
    ``discs`` (each dilated by a ``clear`` px square): its skin away from them."""
    import cv2

    area = np.zeros(shape[:2], np.uint8)
    cv2.fillConvexPoly(area, cv2.convexHull(face.landmarks_478[:, :2].astype(np.int32)), 1)
    away = cv2.erode(area, np.ones((edge, edge), np.uint8)) > 0
    for disc in discs:
        away &= cv2.dilate(disc.astype(np.uint8), np.ones((clear, clear), np.uint8)) == 0
    return away


def green_microphone(frame: np.ndarray, face) -> np.ndarray:
    """``frame`` with a green bar across the face's left cheek to a disc at its mouth's
    corner (a microphone), drawn on the face it holds."""
    import cv2

    points = face.landmarks_478[:, :2]
    end = tuple(int(v) for v in points[61] + (5, 5))
    out = frame.copy()
    cv2.line(out, tuple(int(v) for v in points[205] + (-40, 30)), end, (40, 200, 40), 14)
    cv2.circle(out, end, 14, (40, 200, 40), -1)
    return out


def tiny_occluder(
    path: Path,
    *,
    size: int | str = 256,
    channels_last: bool = True,
    output: str = "mask",
    input_type: int = TensorProto.FLOAT,
    nan: bool = False,
    output_side: int | str | None = None,
) -> Path:
    """A face occluder's signature (DeepFaceLab's XSeg: input ``in_face:0`` [1, S, S, 3],
    BGR in 0..1 -> ``out_mask:0`` [1, S, S, 1], the face's visibility): what is green
    (G over both B and R by a tenth or more) is covered (0), the rest seen (1):
    ``1 - clip(8 * (G - max(B, R)), 0, 1)``. ``channels_last`` False: [1, 3, S, S] in,
    [1, 1, S, S] out. ``size`` may be a name (a dimension the file leaves open).
    ``output``: ``mask`` (as above), ``flat`` ([1, S, S]) or ``rgb`` (three channels:
    a wrong signature). ``nan``: the output is NaN (a model that misbehaves).
    ``output_side``: the output's side as declared (default ``size``)."""
    axis = 3 if channels_last else 1
    image = [1, size, size, 3] if channels_last else [1, 3, size, size]
    inits = [
        numpy_helper.from_array(np.array(8.0, np.float32), "gain"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]
    first = "x32"
    nodes = [helper.make_node("Cast", ["in_face:0"], [first], to=TensorProto.FLOAT)]
    nodes += [
        helper.make_node("Split", [first], ["b", "g", "r"], axis=axis),
        helper.make_node("Max", ["b", "r"], ["other"]),
        helper.make_node("Sub", ["g", "other"], ["green"]),
        helper.make_node("Mul", ["green", "gain"], ["strong"]),
        helper.make_node("Clip", ["strong", "zero", "one"], ["covered"]),
        helper.make_node("Sub", ["one", "covered"], ["seen"]),
    ]
    side = size if output_side is None else output_side
    shape: list = [1, side, side, 1] if channels_last else [1, 1, side, side]
    last = "seen"
    if nan:
        nodes.append(helper.make_node("Div", ["zero", "zero"], ["nan"]))
        nodes.append(helper.make_node("Add", [last, "nan"], ["seen_nan"]))
        last = "seen_nan"
    if output == "flat":
        inits.append(numpy_helper.from_array(np.array([axis], np.int64), "axes"))
        nodes.append(helper.make_node("Squeeze", [last, "axes"], ["out_mask:0"]))
        shape = [1, side, side]
    elif output == "rgb":
        nodes.append(helper.make_node("Concat", [last, last, last], ["out_mask:0"], axis=axis))
        shape = [1, side, side, 3] if channels_last else [1, 3, side, side]
    else:
        nodes.append(helper.make_node("Identity", [last], ["out_mask:0"]))
    return _save(
        nodes,
        "tiny_occluder",
        [helper.make_tensor_value_info("in_face:0", input_type, image)],
        [helper.make_tensor_value_info("out_mask:0", TensorProto.FLOAT, shape)],
        inits,
        path,
    )


# CelebAMask-HQ's class indices the tiny parser gives (see tiny_parser).
PARSER_SKIN, PARSER_GLASSES, PARSER_HAIR = 1, 6, 17
PARSER_BLUE = (255, 0, 0)  # BGR: what the tiny parser takes for glasses


def tiny_parser(
    path: Path,
    *,
    size: int | str = 512,
    classes: int = 19,
    output_side: int | tuple[int, int] | None = None,
    aux_outputs: bool = False,
    input_type: int = TensorProto.FLOAT,
    nan: bool = False,
    channels_last: bool = False,
) -> Path:
    """A face parser's signature (BiSeNet on CelebAMask-HQ: ``input`` [1, 3, S, S], RGB
    normalised by ImageNet's mean and deviation -> ``output`` [1, 19, S, S], a score per
    class): one 1x1 convolution that undoes the normalisation and scores, on 0..1
    colours, skin 0, hair (class 17) ``4 (2G - R - B) - 0.8`` (green), glasses (6)
    ``4 (2B - R - G) - 0.8`` (blue), every other class -100. ``output_side``: the
    output resized to that side (declared so), or to (height, width) (declared open:
    a model that gives no square); ``aux_outputs``: two more outputs after
    it, as BiSeNet's training export has; ``classes``: another count (a wrong
    signature); ``nan``: the output is NaN; ``channels_last``: [1, S, S, 3] in (a wrong
    signature). ``size`` may be a name (a side the file leaves open)."""
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    # Scores on 0..1 RGB colours: a (classes, 3) and b (classes,).
    a = np.zeros((classes, 3))
    b = np.full(classes, -100.0)
    b[PARSER_SKIN] = 0.0
    if classes > PARSER_HAIR:
        a[PARSER_HAIR], b[PARSER_HAIR] = (-4.0, 8.0, -4.0), -0.8
        a[PARSER_GLASSES], b[PARSER_GLASSES] = (-4.0, -4.0, 8.0), -0.8
    # On the normalised input x = (v - mean) / std: v = x * std + mean.
    weight = (a * std)[:, :, None, None].astype(np.float32)
    bias = (b + a @ mean).astype(np.float32)
    inits = [
        numpy_helper.from_array(weight, "weight"),
        numpy_helper.from_array(bias, "bias"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    first = "x32"
    nodes = [helper.make_node("Cast", ["input"], [first], to=TensorProto.FLOAT)]
    if channels_last:
        nodes.append(helper.make_node("Transpose", [first], ["nchw"], perm=[0, 3, 1, 2]))
        first = "nchw"
    nodes.append(helper.make_node("Conv", [first, "weight", "bias"], ["scores"]))
    last = "scores"
    if nan:
        nodes.append(helper.make_node("Div", ["zero", "zero"], ["nan"]))
        nodes.append(helper.make_node("Add", [last, "nan"], ["scores_nan"]))
        last = "scores_nan"
    sides: list = [size, size]
    if output_side is not None:
        high, wide = output_side if isinstance(output_side, tuple) else (output_side,) * 2
        sides = ["h", "w"] if isinstance(output_side, tuple) else [high, wide]
        inits.append(numpy_helper.from_array(np.array([1, classes, high, wide], np.int64), "to"))
        nodes.append(helper.make_node("Resize", [last, "", "", "to"], ["resized"], mode="linear"))
        last = "resized"
    nodes.append(helper.make_node("Identity", [last], ["output"]))
    outputs = [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, classes, *sides])]
    if aux_outputs:
        for name in ("aux16", "aux32"):
            nodes.append(helper.make_node("Identity", ["scores"], [name]))
            outputs.append(
                helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, classes, size, size])
            )
    image = [1, size, size, 3] if channels_last else [1, 3, size, size]
    return _save(
        nodes,
        "tiny_parser",
        [helper.make_tensor_value_info("input", input_type, image)],
        outputs,
        inits,
        path,
    )


def tiny_frame_enhancer(
    path: Path,
    *,
    scale: int | float = 2,
    tile: int | None = None,
    gain: float = 1.0,
    input_type: int = TensorProto.FLOAT,
    channels: int = 3,
    nan: bool = False,
) -> Path:
    """A frame enhancer's signature (Real-ESRGAN: ``input`` [1, 3, H, W], RGB 0..1 ->
    ``output`` [1, 3, sH, sW]): each pixel repeated ``scale`` times each way (nearest
    neighbour), times ``gain``. ``tile``: H = W fixed to it (else left open); ``channels``
    out: another count (a wrong signature); ``nan``: the output is NaN."""
    side: int | str = tile if tile is not None else "h"
    wide: int | str = tile if tile is not None else "w"
    inits = [
        numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales"),
        numpy_helper.from_array(np.array(gain, np.float32), "gain"),
        numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
    ]
    nodes = [
        helper.make_node("Cast", ["input"], ["x32"], to=TensorProto.FLOAT),
        helper.make_node(
            "Resize",
            ["x32", "", "scales"],
            ["big"],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
        helper.make_node("Mul", ["big", "gain"], ["lit"]),
    ]
    last = "lit"
    if channels != 3:
        nodes.append(helper.make_node("Concat", [last] * (channels // 3 + 1), ["many"], axis=1))
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "starts"))
        inits.append(numpy_helper.from_array(np.array([channels], np.int64), "ends"))
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "axes"))
        nodes.append(helper.make_node("Slice", ["many", "starts", "ends", "axes"], ["cut"]))
        last = "cut"
    if nan:
        nodes.append(helper.make_node("Div", ["zero", "zero"], ["nan"]))
        nodes.append(helper.make_node("Add", [last, "nan"], ["lit_nan"]))
        last = "lit_nan"
    nodes.append(helper.make_node("Identity", [last], ["output"]))
    out_side: int | str = int(tile * scale) if tile is not None else "sh"
    out_wide: int | str = int(tile * scale) if tile is not None else "sw"
    return _save(
        nodes,
        "tiny_frame_enhancer",
        [helper.make_tensor_value_info("input", input_type, [1, 3, side, wide])],
        [
            helper.make_tensor_value_info(
                "output", TensorProto.FLOAT, [1, channels, out_side, out_wide]
            )
        ],
        inits,
        path,
    )
