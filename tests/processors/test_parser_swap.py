"""Swaps with a face parser (``--parser-model``, ``--mask-regions``, FaceParser): only
the regions asked for are swapped, in both engines; what is no region of the face
(hair) and the regions left out stay the target's; a source photo's hair is hidden;
and the parser through the engine settings, the Python API, the service and the
command line. The parser is a tiny ONNX model with BiSeNet's signature built here
(tests/neural_models.py): green is hair, blue glasses, the rest skin."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("onnx")
from cli_runner import run_cli as _cli  # noqa: E402  (tests/ is on sys.path)
from neural_models import (  # noqa: E402  (tests/ is on sys.path)
    PARSER_BLUE,
    changed,
    face_away,
    green_microphone,
    green_patch,
    tiny_embedder,
    tiny_occluder,
    tiny_parser,
    tiny_swapper,
)

import faceweave as fw  # noqa: E402
from faceweave.analysis.parser import REGIONS  # noqa: E402
from faceweave.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE, InputError  # noqa: E402
from faceweave.io.image import read_image, write_image  # noqa: E402
from faceweave.processors.engines import EngineSettings, SwapEngine  # noqa: E402
from faceweave.types import Face  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("parsed")
    swapper, _, _ = tiny_swapper(root / "tint.onnx", tint=0.9)
    return {
        "parser": tiny_parser(root / "bisenet.onnx", size=256),
        "occluder": tiny_occluder(root / "xseg.onnx"),
        "embedder": tiny_embedder(root / "arcface.onnx"),
        "swapper": swapper,
    }


@pytest.fixture(scope="module")
def parser(files: dict[str, Path]) -> fw.FaceParser:
    return fw.FaceParser(files["parser"])


def _blue_lens(frame: np.ndarray, face: Face) -> tuple[np.ndarray, np.ndarray]:
    """``frame`` with a blue disc (glasses, to the tiny parser) on the face's right
    cheek (image right), and the disc's mask."""
    out = frame.copy()
    disc = np.zeros(frame.shape[:2], np.uint8)
    centre = tuple(int(v) for v in face.landmarks_478[425, :2])
    cv2.circle(disc, centre, int(0.1 * face.size), 1, -1)
    out[disc > 0] = PARSER_BLUE
    return out, disc > 0


def _inner(disc: np.ndarray) -> np.ndarray:
    return cv2.erode(disc.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0


def _check_regions(swapper, parser, astronaut, face) -> None:
    """Hair (green) stays; glasses (blue) stay by default and are swapped when asked
    for; the skin is swapped as on the frame without either; with no skin asked for,
    the face stays the target's."""
    frame, hair = green_patch(astronaut, face)
    frame, lens = _blue_lens(frame, face)
    away = face_away(face, frame.shape, hair, lens)
    plain = swapper.swap(frame, [face])
    parsed = swapper.with_occluder(parser).swap(frame, [face])
    bare = swapper.swap(astronaut, [face])
    for disc in (hair, lens):
        assert changed(plain, frame, _inner(disc)).mean() > 60  # painted over
        assert changed(parsed, frame, _inner(disc)).max() <= 1  # kept
    assert changed(parsed, frame, away).mean() > 20  # swapped
    # As without the discs, within the shift of the light measured without both cheeks'
    # discs (3 grey levels; one disc: 1).
    assert np.median(changed(parsed, bare, away)) <= 4
    with_glasses = swapper.with_occluder(parser.with_regions(["all"])).swap(frame, [face])
    assert changed(with_glasses, frame, _inner(lens)).mean() > 60
    assert changed(with_glasses, frame, _inner(hair)).max() <= 1
    nose_only = swapper.with_occluder(parser.with_regions(["nose"])).swap(frame, [face])
    # (The tiny parser reads the whole face as skin: no nose, so nothing is swapped.)
    assert np.median(changed(nose_only, frame, away)) <= 1


def test_the_mesh_engine_swaps_only_the_regions_asked_for(
    parser: fw.FaceParser, astronaut: np.ndarray, astronaut_face: Face, grace_hopper_face: Face
) -> None:
    _check_regions(fw.Swapper(grace_hopper_face), parser, astronaut, astronaut_face)


def test_the_neural_engine_swaps_only_the_regions_asked_for(
    files: dict[str, Path],
    parser: fw.FaceParser,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper_face: Face,
) -> None:
    swapper = fw.NeuralSwapper(
        grace_hopper_face, swapper_model=files["swapper"], embedder_model=files["embedder"]
    )
    _check_regions(swapper, parser, astronaut, astronaut_face)


def test_what_is_no_region_of_the_source_photos_face_is_hidden(
    parser: fw.FaceParser,
    analyser: fw.FaceAnalyser,
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper: np.ndarray,
    grace_hopper_face: Face,
) -> None:
    """A source photo with something green (hair, to the tiny parser) across its cheek
    to its mouth's corner: carried onto the target as a blob by the mouth without the
    parser, hidden with it (those texels taken from elsewhere)."""
    held = analyser.get_faces(green_microphone(astronaut, astronaut_face))[0]
    bare = fw.Swapper(astronaut_face).swap(grace_hopper, [grace_hopper_face])
    plain = fw.Swapper(held).swap(grace_hopper, [grace_hopper_face])
    kept = fw.Swapper(held, occluder=parser).swap(grace_hopper, [grace_hopper_face])
    blob = np.abs(plain.astype(int) - bare).max(axis=2) > 30
    assert blob.sum() > 150  # carried

    def redness(image: np.ndarray) -> float:  # Lab a's median over the blob (green: low)
        return float(np.median(cv2.cvtColor(image, cv2.COLOR_BGR2LAB)[blob][:, 1]))

    assert redness(plain) < redness(bare) - 10 and abs(redness(kept) - redness(bare)) <= 4


def test_the_engine_settings_load_a_parser_and_an_occluder_as_one(
    files: dict[str, Path], tmp_path: Path, grace_hopper_face: Face
) -> None:
    settings = EngineSettings(parser_model=str(files["parser"]), mask_regions=["nose", "skin"])
    assert settings.mask_regions == ("skin", "nose") and not settings.embedded_only
    # The regions as they run: "all" spelled out, each once (settings compare by them).
    every = EngineSettings(parser_model=files["parser"], mask_regions=["all"])
    assert every == EngineSettings(parser_model=files["parser"], mask_regions=REGIONS)
    assert EngineSettings(mask_regions=["skin", "skin"]).mask_regions == ("skin",)
    engine = SwapEngine(settings)
    assert isinstance(engine.occluder, fw.FaceParser)
    assert engine.occluder.regions == ("skin", "nose")
    assert engine.swapper(grace_hopper_face).occluder is engine.occluder
    both = SwapEngine(
        EngineSettings(parser_model=files["parser"], occluder_model=files["occluder"])
    )
    assert isinstance(both.occluder, fw.Occluders)
    assert [type(o) for o in both.occluder.parts] == [fw.FaceOccluder, fw.FaceParser]
    with pytest.raises(fw.UsageError, match="mask regions are a face parser's"):
        EngineSettings(mask_regions=("nose",)).validated()
    with pytest.raises(fw.UsageError, match="unknown face region 'ears'"):
        EngineSettings(parser_model=files["parser"], mask_regions=("ears",)).validated()
    with pytest.raises(InputError, match="model file not found"):
        EngineSettings(parser_model=tmp_path / "missing.onnx").validated()


def test_the_python_api_takes_a_parser_model(
    files: dict[str, Path], astronaut: np.ndarray, astronaut_face: Face, grace_hopper: np.ndarray
) -> None:
    frame, hair = green_patch(astronaut, astronaut_face)
    away = face_away(astronaut_face, frame.shape, hair)
    out = fw.FacePredictor(parser_model=files["parser"]).swap(frame, grace_hopper, astronaut_face)
    assert changed(out, frame, _inner(hair)).max() <= 1
    assert changed(out, frame, away).mean() > 20
    none = fw.FacePredictor(parser_model=files["parser"], mask_regions=["nose"]).swap(
        frame, grace_hopper, astronaut_face
    )
    assert np.median(changed(none, frame, away)) <= 1
    with pytest.raises(fw.UsageError, match="mask regions are a face parser's: give its model"):
        fw.FacePredictor(mask_regions=["nose"])


@pytest.mark.slow
def test_command_line_swaps_only_the_regions_asked_for(
    files: dict[str, Path],
    astronaut: np.ndarray,
    astronaut_face: Face,
    grace_hopper: np.ndarray,
    tmp_path: Path,
) -> None:
    frame, hair = green_patch(astronaut, astronaut_face)
    frame, lens = _blue_lens(frame, astronaut_face)
    write_image(tmp_path / "grace.png", grace_hopper)
    write_image(tmp_path / "target.png", frame)
    common = ["swap", "-s", "grace.png", "-t", "target.png", "--no-watermark"]
    model = ["--parser-model", files["parser"]]
    done = _cli(*common, "-o", "out.png", *model, "--debug", "debug.png", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    out = read_image(tmp_path / "out.png")
    away = face_away(astronaut_face, frame.shape, hair, lens)
    assert changed(out, frame, _inner(hair)).max() <= 1
    assert changed(out, frame, _inner(lens)).max() <= 1
    assert changed(out, frame, away).mean() > 20
    # The overlay tints what is not swapped orange: the green lock takes red.
    debug = read_image(tmp_path / "debug.png")
    assert debug[_inner(hair)][:, 2].mean() > 50 > frame[_inner(hair)][:, 2].max()
    # Glasses asked for: swapped.
    done = _cli(*common, "-o", "g.png", *model, "--mask-regions", "all", cwd=tmp_path)
    assert done.returncode == EXIT_OK, done.stderr
    assert changed(read_image(tmp_path / "g.png"), frame, _inner(lens)).mean() > 60

    for flags, code, message in (
        (["--mask-regions", "nose"], EXIT_USAGE, "--mask-regions is for --parser-model"),
        # (given twice, a usage error as every option: they had been merged)
        (["--mask-areas", "mouth", "--mask-areas", "lower-face"], EXIT_USAGE, "more than once"),
        ([*model, "--mask-regions", "ears"], EXIT_USAGE, "invalid choice: 'ears'"),
        ([*model, "--mask-regions", "all", "skin"], EXIT_USAGE, "'all' is every region"),
        (["--parser-model", "nope.onnx"], EXIT_ERROR, "nope.onnx: model file not found"),
        (["--parser-model", files["embedder"]], EXIT_ERROR, "expected [1, 19, size, size]"),
    ):
        failed = _cli(*common, "-o", "bad.png", *flags, cwd=tmp_path)
        assert failed.returncode == code, failed.stderr
        assert message in failed.stderr and "Traceback" not in failed.stderr
        assert not (tmp_path / "bad.png").exists()
