"""The face parser (FaceParser): its model contract, its pre- and post-processing, the
regions it keeps, and several occluders as one (Occluders, merged), on tiny ONNX models
with BiSeNet's signature built here (tests/neural_models.py: green is hair, blue is
glasses, the rest skin)."""

from __future__ import annotations

import re
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    PARSER_BLUE,
    PARSER_GLASSES,
    PARSER_HAIR,
    PARSER_SKIN,
    face_away,
    green_patch,
    tiny_occluder,
    tiny_parser,
)
from onnx import TensorProto  # noqa: E402

from faceweave.analysis.occluder import (  # noqa: E402
    FaceOccluder,
    Occluder,
    Occluders,
    Occlusion,
    merged,
)
from faceweave.analysis.parser import (  # noqa: E402
    DEFAULT_REGIONS,
    PARSER_CLASSES,
    REGIONS,
    FaceParser,
    checked_regions,
)
from faceweave.core.align import alignment, ffhq_alignment  # noqa: E402
from faceweave.errors import BackendError, InputError  # noqa: E402
from faceweave.types import Face  # noqa: E402


@pytest.fixture(scope="module")
def parser_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_parser(tmp_path_factory.mktemp("parser") / "bisenet.onnx")


def _frame_mask(occlusion: Occlusion, shape: tuple[int, ...]) -> np.ndarray:
    h, w = shape[:2]
    return occlusion.in_crop(np.array([[1.0, 0, 0], [0, 1.0, 0]]), (w, h))


def _disc(frame: np.ndarray, centre: np.ndarray, radius: int, colour) -> tuple[np.ndarray, ...]:
    out = frame.copy()
    disc = np.zeros(frame.shape[:2], np.uint8)
    cv2.circle(disc, tuple(int(v) for v in centre), radius, 1, -1)
    out[disc > 0] = colour
    inner = cv2.erode(disc, np.ones((7, 7), np.uint8)) > 0
    return out, disc > 0, inner


def _face_away(face: Face, shape: tuple[int, ...], *discs: np.ndarray) -> np.ndarray:
    """The face's mesh area, clear of its outline and of the discs."""
    return face_away(face, shape, *discs, edge=15, clear=15)


@pytest.mark.parametrize(
    ("options", "size"),
    [
        ({}, 512),
        ({"size": 256}, 256),
        ({"size": "side"}, 512),  # left open in the file: BiSeNet's 512
        ({"input_type": TensorProto.FLOAT16}, 512),
        ({"size": 256, "output_side": 64}, 256),  # a coarser output, resized to the crop
        ({"aux_outputs": True}, 512),  # BiSeNet's training export: the first is used
    ],
)
def test_parser_reads_its_models_layout(tmp_path: Path, options: dict, size: int) -> None:
    parser = FaceParser(tiny_parser(tmp_path / "m.onnx", **options))
    assert parser.size == size and parser.regions == DEFAULT_REGIONS
    crop = np.full((size, size, 3), (90, 130, 200), np.uint8)  # skin-like (BGR)
    crop[: size // 4] = (0, 200, 0)  # green: hair
    crop[-size // 4 :] = PARSER_BLUE  # glasses
    labels = parser.run(crop)
    side = options.get("output_side", size)
    assert labels.shape == (side, side)
    quarter = side // 4
    assert (labels[: quarter - 1] == PARSER_HAIR).all()
    assert (labels[quarter + 1 : -quarter - 1] == PARSER_SKIN).all()
    assert (labels[-quarter + 1 :] == PARSER_GLASSES).all()
    assert PARSER_CLASSES[PARSER_HAIR] == "hair" and PARSER_CLASSES[PARSER_GLASSES] == "glasses"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"classes": 11}, "expected [1, 19, size, size]"),
        ({"channels_last": True}, "expected [1, 3, size, size] (an RGB face)"),
        ({"input_type": TensorProto.UINT8}, "expected float32 or float16"),
        ({"size": 4096}, "is over 2048 px a side: not a face parser"),
        ({"size": 8}, "too small for a face"),
        ({"size": 64, "output_side": 1}, "a face's labels are 2 to 2048 px a side"),
    ],
)
def test_parser_refuses_another_signature(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)):
        FaceParser(tiny_parser(tmp_path / "m.onnx", **options))


def test_parser_refuses_other_models_files_and_regions(tmp_path: Path, parser_file: Path) -> None:
    from neural_models import tiny_swapper

    with pytest.raises(InputError, match=r"expected \[1, 19, size, size\]"):
        FaceParser(tiny_occluder(tmp_path / "xseg.onnx", channels_last=False))  # a mask out
    swapper, _, _ = tiny_swapper(tmp_path / "swap.onnx")
    with pytest.raises(InputError, match="expected one image input"):
        FaceParser(swapper)  # two inputs
    with pytest.raises(InputError, match="model file not found"):
        FaceParser(tmp_path / "missing.onnx")
    with pytest.raises(InputError, match="a .onnx file's path"):
        FaceParser(42)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown face region 'hair': choose from skin, "):
        FaceParser(parser_file, regions=["skin", "hair"])
    with pytest.raises(InputError, match="give one or more regions"):
        FaceParser(parser_file, regions=[])
    with pytest.raises(InputError, match="regions are a list of names"):
        FaceParser(parser_file, regions=3)  # type: ignore[arg-type]


def test_checked_regions() -> None:
    assert checked_regions("nose") == ("nose",)
    assert checked_regions(["all"]) == checked_regions(["all", "all"]) == REGIONS
    # Each once, in REGIONS' order (a set's order is the same every run).
    assert checked_regions(["nose", "skin", "nose"]) == ("skin", "nose")
    assert checked_regions({"nose", "skin", "mouth"}) == ("skin", "nose", "mouth")
    with pytest.raises(InputError, match="'all' is every region: give it alone"):
        checked_regions(["all", "skin"])
    for junk in (b"skin", {"skin": 1}, None, 3, [1]):
        with pytest.raises(InputError, match="regions are a list of names|unknown face region"):
            checked_regions(junk)
    assert "glasses" in REGIONS and "glasses" not in DEFAULT_REGIONS
    assert len(DEFAULT_REGIONS) == len(REGIONS) - 1


def test_a_model_that_gives_nan_or_no_square_is_a_backend_error(
    tmp_path: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    parser = FaceParser(tiny_parser(tmp_path / "nan.onnx", size=128, nan=True))
    with pytest.raises(BackendError, match=r"not finite \(NaN or infinity\)"):
        parser.occlusion(astronaut, astronaut_face)
    with pytest.raises(BackendError, match=r"not finite \(NaN or infinity\)"):
        parser.run(np.zeros((128, 128, 3), np.uint8))
    # An output that is no square: refused when the file declares it...
    with pytest.raises(InputError, match=r"output \[1, 19, 64, 128\], expected \[1, 19, size"):
        FaceParser(tiny_parser(tmp_path / "oblong.onnx", size=128, output_side=(64, 128)))
    # ... and when the model gives it all the same.
    oblong = FaceParser(tiny_parser(tmp_path / "open.onnx", size=128))
    oblong.model.run = lambda feeds, names: {names[0]: np.zeros((1, 19, 64, 128), np.float32)}
    with pytest.raises(BackendError, match=r"output \[1, 19, 64, 128\] is no face's labels"):
        oblong.occlusion(astronaut, astronaut_face)
    with pytest.raises(InputError, match="takes 128 x 128 crops, got 64 x 64"):
        oblong.run(np.zeros((64, 64, 3), np.uint8))
    with pytest.raises(InputError, match="expected a Face, got str"):
        parser.occlusion(astronaut, "face")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="uint8"):
        parser.occlusion(astronaut.astype(np.float32), astronaut_face)


def test_regions_not_kept_count_as_covered(
    parser_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    face = astronaut_face
    radius = int(0.1 * face.size)
    frame, hair, hair_in = _disc(astronaut, face.landmarks_478[205, :2], radius, (0, 200, 0))
    frame, lens, lens_in = _disc(frame, face.landmarks_478[425, :2], radius, PARSER_BLUE)
    away = _face_away(face, frame.shape, hair, lens)

    parser = FaceParser(parser_file)
    occlusion = parser.occlusion(frame, face)
    assert occlusion.visible.shape == (512, 512)
    np.testing.assert_allclose(occlusion.matrix, ffhq_alignment(face.landmarks_5, 512))
    seen = _frame_mask(occlusion, frame.shape)
    assert seen[hair_in].max() < 0.05  # hair: no region of the face
    assert seen[lens_in].max() < 0.05  # glasses: not swapped by default
    assert np.median(seen[away]) > 0.99  # the skin: kept

    # Glasses asked for: swapped; skin left out: the skin covered.
    with_glasses = _frame_mask(parser.with_regions(["all"]).occlusion(frame, face), frame.shape)
    assert with_glasses[lens_in].min() > 0.95 and with_glasses[hair_in].max() < 0.05
    no_skin = _frame_mask(parser.with_regions(["nose"]).occlusion(frame, face), frame.shape)
    assert np.median(no_skin[away]) < 0.01
    assert parser.regions == DEFAULT_REGIONS  # with_regions made a copy


def test_occluders_combine_in_the_widest_crop(
    tmp_path: Path, parser_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    face = astronaut_face
    # Green is covered for both models; blue only for the parser (glasses).
    frame, green = green_patch(astronaut, face)
    frame, lens, lens_in = _disc(
        frame, face.landmarks_478[425, :2], int(0.1 * face.size), PARSER_BLUE
    )
    green_in = cv2.erode(green.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    occluder = FaceOccluder(tiny_occluder(tmp_path / "xseg.onnx"))
    parser = FaceParser(parser_file)
    alone = occluder.occlusion(frame, face)
    both = Occluders([occluder, parser]).occlusion(frame, face)
    # The parser's FFHQ crop shows more of the frame than the occluder's ArcFace one.
    np.testing.assert_allclose(both.matrix, ffhq_alignment(face.landmarks_5, 512))
    np.testing.assert_allclose(alone.matrix, alignment(face.landmarks_5, 256))
    seen, seen_alone = _frame_mask(both, frame.shape), _frame_mask(alone, frame.shape)
    assert seen[green_in].max() < 0.05 and seen[lens_in].max() < 0.05
    assert seen_alone[lens_in].min() > 0.95  # the occluder alone does not cover blue
    away = _face_away(face, frame.shape, green, lens)
    assert np.median(seen[away]) > 0.99
    # merged: one occlusion is itself; none, or something else, is an error.
    assert merged([alone]) is alone
    for junk in ([], [1, 2], (o for o in [alone])):
        with pytest.raises(InputError, match="merged takes"):
            merged(junk)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="a list of one or more occluders"):
        Occluders([])
    with pytest.raises(InputError, match="a list of one or more occluders"):
        Occluders([occluder, "parser"])  # type: ignore[list-item]


def test_kept_agrees_with_the_argmax(
    parser_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    """The fast kept mask (best kept score against best other) is the argmax's regions."""
    parser = FaceParser(parser_file).with_regions(["skin", "glasses"])
    frame, _, _ = _disc(astronaut, astronaut_face.landmarks_478[205, :2], 30, (0, 200, 0))
    frame, _, _ = _disc(frame, astronaut_face.landmarks_478[425, :2], 30, PARSER_BLUE)
    crop = cv2.warpAffine(frame, ffhq_alignment(astronaut_face.landmarks_5, 512), (512, 512))
    labels = parser.run(crop)
    assert {PARSER_SKIN, PARSER_HAIR, PARSER_GLASSES} <= set(np.unique(labels).tolist())
    np.testing.assert_array_equal(parser.kept(crop), np.isin(labels, [PARSER_SKIN, PARSER_GLASSES]))


def test_the_blob_is_rgb_normalised_by_imagenets_mean_and_deviation(parser_file: Path) -> None:
    crop = np.random.default_rng(0).integers(0, 256, (512, 512, 3), np.uint8)
    rgb = crop[:, :, ::-1].astype(np.float64) / 255.0
    expected = (rgb - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    blob = FaceParser(parser_file).blob(crop)
    assert blob.shape == (1, 3, 512, 512) and blob.dtype == np.float32
    np.testing.assert_allclose(blob[0].transpose(1, 2, 0), expected, atol=1e-4)


def test_occluders_of_your_own_may_find_nothing_but_give_occlusions(
    parser_file: Path, astronaut: np.ndarray, astronaut_face: Face
) -> None:
    class Nothing(Occluder):
        def occlusion(self, frame: np.ndarray, face: Face) -> Occlusion | None:
            return None

    class Junk(Occluder):
        def occlusion(self, frame: np.ndarray, face: Face) -> Occlusion | None:
            return "covered"  # type: ignore[return-value]

    parser = FaceParser(parser_file)
    alone = parser.occlusion(astronaut, astronaut_face)
    both = Occluders([Nothing(), parser]).occlusion(astronaut, astronaut_face)
    assert both is not None and np.array_equal(both.visible, alone.visible)
    assert Occluders([Nothing()]).occlusion(astronaut, astronaut_face) is None
    with pytest.raises(BackendError, match="Junk.occlusion gave a str, not an Occlusion or None"):
        Occluders([parser, Junk()]).occlusion(astronaut, astronaut_face)
