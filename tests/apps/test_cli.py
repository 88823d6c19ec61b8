"""Tests for the ``faceweave`` command.

Fast tests call :func:`faceweave.apps.cli.main` in-process for argument handling
and error reporting. End-to-end tests run ``python -m faceweave`` in a subprocess
on package-shipped photographs (scikit-image's astronaut, matplotlib's Grace
Hopper) and are marked ``slow``: each one loads the face models.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import faceweave.__main__ as launcher
from faceweave.apps import cli
from faceweave.errors import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_NO_FACE, EXIT_OK, EXIT_USAGE
from faceweave.io import read_image, write_image
from faceweave.processors.swap import SwapOptions
from faceweave.types import Face

REPO_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 300
PROGRESS_BAR = re.compile(r"^faceweave:\s+\d+%\|")  # tqdm, drawn with carriage returns


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str

    @property
    def message_lines(self) -> list[str]:
        """Non-blank stderr lines other than the progress bar."""
        lines = self.stderr.replace("\r", "\n").splitlines()
        return [line for line in lines if line.strip() and not PROGRESS_BAR.match(line)]


def _run(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None, marked: bool = False
) -> Result:
    """Run the CLI; swaps skip the watermark unless ``marked`` (pixel checks need exact pixels)."""
    if args and args[0] == "swap" and not marked:
        args = (*args, "--no-watermark")
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT), *filter(None, [environment.get("PYTHONPATH")])]
    )
    environment.pop("FACEWEAVE_DEBUG", None)
    environment.update(env or {})
    completed = subprocess.run(
        [sys.executable, "-m", "faceweave", *map(str, args)],
        cwd=cwd,
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    return Result(completed.returncode, completed.stdout, completed.stderr)


def _assert_one_error_line(result: Result, *fragments: str) -> None:
    """Exactly one line of stderr besides the progress bar: faceweave's error."""
    assert "Traceback" not in result.stderr, result.stderr
    assert len(result.message_lines) == 1, result.stderr
    line = result.message_lines[0]
    assert line.startswith("faceweave: error: "), line
    for fragment in fragments:
        assert fragment in line, line


def _assert_no_temp_files(*roots: Path) -> None:
    for root in roots:
        assert [p for p in root.rglob("*.tmp")] == []


# --- images ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Images:
    root: Path
    source_png: Path  # the astronaut
    target_png: Path  # Grace Hopper, lossless copy
    target_jpg: Path  # Grace Hopper, the original JPEG
    grey_png: Path  # no face


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Images:
    skimage_data = pytest.importorskip("skimage.data")
    cbook = pytest.importorskip("matplotlib.cbook")
    root = tmp_path_factory.mktemp("images")
    source_png = root / "astronaut.png"
    Image.fromarray(skimage_data.astronaut()).save(source_png)
    # matplotlib >= 3.8: asfileobj=False gives the path of the shipped file.
    hopper = Path(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    target_jpg = root / "hopper.jpg"
    shutil.copyfile(hopper, target_jpg)
    target_png = root / "hopper.png"
    Image.open(hopper).convert("RGB").save(target_png)
    grey_png = root / "grey.png"
    write_image(grey_png, np.full((256, 256, 3), 128, dtype=np.uint8))
    return Images(root, source_png, target_png, target_jpg, grey_png)


@pytest.fixture(scope="module")
def target_faces(images: Images, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """``analyse --json`` of the target, run once for the module."""
    result = _run("analyse", images.target_png, "--json", cwd=tmp_path_factory.mktemp("cwd"))
    assert result.returncode == EXIT_OK, result.stderr
    faces = json.loads(result.stdout)
    assert isinstance(faces, list)
    return faces


def _face_box(faces: list[dict], shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = faces[0]["bbox"]
    height, width = shape[:2]
    return (max(int(x0), 0), max(int(y0), 0), min(int(x1), width), min(int(y1), height))


def _far_from_face(box: tuple[int, int, int, int], shape: tuple[int, ...]) -> np.ndarray:
    """Pixels outside the face box grown by half its size on each side."""
    x0, y0, x1, y1 = box
    grow_x, grow_y = (x1 - x0) // 2, (y1 - y0) // 2
    far = np.ones(shape[:2], dtype=bool)
    far[max(y0 - grow_y, 0) : y1 + grow_y, max(x0 - grow_x, 0) : x1 + grow_x] = False
    return far


# --- fast, in-process ------------------------------------------------------------------------


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == EXIT_OK
    assert "swap" in capsys.readouterr().out
    assert cli.main(["swap", "--help"]) == EXIT_OK
    assert "--fusion" in capsys.readouterr().out
    assert cli.main(["analyze", "--help"]) == EXIT_OK


@pytest.mark.parametrize(
    "extra",
    [
        ["--fusion", "1.5"],
        ["--fusion", "-0.1"],
        ["--fusion", "nan"],
        ["--fusion", "much"],
        ["--detail", "2"],
        ["--light", "2"],
        ["--shape", "-1"],
        ["--quality", "0"],
        ["--quality", "101"],
        ["--max-faces", "0"],
        ["--max-pixels", "-5"],
        ["--reference-distance", "-1"],
        ["--color", "purple"],
        ["--blend", "smudge"],
        ["--face-order", "random"],
        ["--detector-angles", "45"],
    ],
)
def test_bad_option_values_are_usage_errors(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", "a.png", "-t", "b.png", "-o", str(tmp_path / "out.png"), *extra]
    assert cli.main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines  # one line, not argparse's usage block
    assert lines[0].startswith("faceweave: error: argument " + extra[0]), lines[0]
    assert lines[0].endswith("(see faceweave swap --help)"), lines[0]
    assert list(tmp_path.iterdir()) == []


def test_version_and_the_feathers_range(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``faceweave --version`` prints the version (it was a usage error); ``--feather``
    says its own range, 0 to 0.5, for every value out of it (-1 had said 0 to 1)."""
    import faceweave

    assert cli.main(["--version"]) == EXIT_OK
    assert capsys.readouterr().out == f"faceweave {faceweave.__version__}\n"
    for value in ("-1", "0.6"):
        argv = ["swap", "-s", "a.png", "-t", "b.png", "-o", str(tmp_path / "o.png")]
        assert cli.main([*argv, "--feather", value]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert f"--feather: must be between 0 and 0.5, got {value}" in err, err


@pytest.mark.parametrize("command", ["swap", "live"])
def test_options_that_would_do_nothing_are_usage_errors(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--light`` with ``--color sh`` (whose relight takes the target's light whole)
    and ``--reference-distance`` without a reference face had been ignored."""
    argv = [command, "-s", "a.png"]
    argv += ["-t", "b.png", "-o", str(tmp_path / "o.png")] if command == "swap" else []
    argv += ["-o", str(tmp_path / "o.mp4")] if command == "live" else []
    cases = [
        (["--light", "0.2", "--color", "sh"], "--light is not used with --color sh"),
        (["--reference-distance", "0.5"], "--reference-distance is for a reference face"),
        (["--reference-distance", "0.5", "--face-selector", "many"], "--reference-distance"),
    ]
    for extra, message in cases:
        assert cli.main([*argv, *extra]) == EXIT_USAGE
        err = capsys.readouterr().err
        assert err.startswith(f"faceweave: error: {message}") and err.count("\n") == 1, err
    args = cli.build_parser().parse_args([*argv, "--light", "0.2"])
    cli._settle_defaults(args, "one")
    assert args.light == 0.2 and args.reference_distance == cli.DEFAULT_REFERENCE_DISTANCE
    assert SwapOptions.from_settings(args).light == 0.2
    assert SwapOptions.from_settings(cli.build_parser().parse_args(argv)).light == (
        cli.DEFAULT_LIGHT
    )


def test_creases_reach_a_still_image(images: Images, tmp_path: Path) -> None:
    """``--creases`` on an image target sets how much of a smile's folds the swap
    takes (it had been a usage error, for video targets only): Grace Hopper's mouth
    at rest onto the astronaut's smile takes them, ``--creases 0`` none."""
    argv = ["swap", "-s", str(images.target_png), "-t", str(images.source_png), "--no-watermark"]
    outputs = []
    for extra in ([], ["--creases", "0"]):
        output = tmp_path / f"out{len(outputs)}.png"
        assert cli.main([*argv, "-o", str(output), *extra]) == EXIT_OK
        outputs.append(read_image(output).astype(np.int16))
    change = np.abs(outputs[0] - outputs[1]).max(axis=2)
    assert int(change.max()) > 10
    assert float((change > 2).mean()) < 0.02  # the folds beside the mouth only


def test_landmarks_without_json_is_a_usage_error(
    images: Images, capsys: pytest.CaptureFixture[str]
) -> None:
    """``analyse --landmarks`` adds the mesh points to --json's output: without --json
    it had been ignored."""
    assert cli.main(["analyse", str(images.target_png), "--landmarks"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert (
        err == "faceweave: error: --landmarks adds the mesh points to --json's output: add --json\n"
    )


def test_a_detector_file_that_is_no_model_is_its_own_error(
    images: Images, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ONNX detector file that does not load is named alone, before any image is
    read (the error had come from the first image, as its own: "a.png: junk.onnx: ...")."""
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00not a model" * 50)
    detector = ["--detector", "yunet", "--detector-model", str(junk)]
    out = str(tmp_path / "o.png")
    src, tgt = str(images.source_png), str(images.target_png)
    for argv in (["analyse", tgt, *detector], ["swap", "-s", src, "-t", tgt, "-o", out, *detector]):
        assert cli.main(argv) == EXIT_ERROR
        err = capsys.readouterr().err
        assert err.startswith(f"faceweave: error: {junk}: not a loadable ONNX model"), err
        assert err.count("\n") == 1


def test_missing_required_and_no_command_are_usage_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in ([], ["swap", "--source", "a.png"], ["analyse"], ["dance"]):
        assert cli.main(argv) == EXIT_USAGE
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("faceweave: error: "), (argv, lines)


def test_native_writes_after_the_command_stay_silenced(tmp_path: Path) -> None:
    """A MediaPipe graph opens its models in threads of its own and may write to fd 2
    after the command has returned: as the process's command line (no argv), faceweave
    keeps fd 2 silenced until exit, so its one error line stays the only line."""
    script = (
        "import atexit, os, sys\n"
        "from faceweave.apps import cli\n"
        "atexit.register(lambda: os.write(2, b'late native note\\n'))\n"
        f"sys.argv = ['faceweave', 'analyse', {str(tmp_path / 'missing.png')!r}]\n"
        "raise SystemExit(cli.main())\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == EXIT_ERROR, run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("faceweave: error: "), run.stderr


@pytest.mark.parametrize(
    ("argv", "command"),
    [
        (["swap", "-s", "a.png", "-t", "b.png", "-o", "c.png", "--colour", "lct"], "swap"),
        (["analyse", "a.png", "--jsn"], "analyse"),
        (["keys", "list", "--all"], "keys list"),
        (["serve", "--engines", "x"], "serve"),
    ],
)
def test_an_unknown_option_names_its_commands_help(
    argv: list[str], command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Argparse reports leftovers from the top parser: the line must still point to the
    sub-command's help, where its options are (not to the list of commands)."""
    assert cli.main(argv) == EXIT_USAGE
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("faceweave: error: unrecognized arguments: "), lines[0]
    assert lines[0].endswith(f"(see faceweave {command} --help)"), lines[0]


@pytest.mark.parametrize(
    "extra",
    [
        ["--face-selector", "reference"],
        ["--face-selector", "many", "--reference-face", "r.png"],
    ],
)
def test_reference_options_must_fit(
    extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", "a.png", "-t", "b.png", "-o", str(tmp_path / "o.png"), *extra]
    assert cli.main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("faceweave: error: ")
    assert "--reference-face" in err


def test_missing_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path / "nope.png"), "-o", "o.png"]
    assert cli.main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err == f"faceweave: error: {tmp_path / 'nope.png'}: no such file\n"


def test_unsupported_output_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "t.png"
    write_image(target, np.zeros((8, 8, 3), dtype=np.uint8))
    argv = ["swap", "-s", str(target), "-t", str(target), "-o", str(tmp_path / "o.gif")]
    # A bad argument: exit 2 (it had been 1, as for a file that cannot be read).
    assert cli.main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("faceweave: error: --output ") and "unsupported image format" in err
    assert err.count("\n") == 1
    # A folder that is not there (a name ending in a slash): said so.
    argv[-1] = str(tmp_path / "new") + "/"
    assert cli.main(argv) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "no such folder, and no image extension for a file" in err, err


def test_a_heic_output_is_refused_up_front(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HEIC is read, not written: the error says what to write instead, before any work."""
    target = tmp_path / "t.png"
    write_image(target, np.zeros((8, 8, 3), dtype=np.uint8))
    argv = ["swap", "-s", str(target), "-t", str(target), "-o", str(tmp_path / "o.heic")]
    assert cli.main(argv) == EXIT_USAGE  # (a bad argument)
    err = capsys.readouterr().err
    assert err.startswith("faceweave: error: ") and err.count("\n") == 1
    assert "HEIC is read but not written" in err and ".jpg" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.png"]


def test_batch_output_must_differ_from_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_image(tmp_path / "t.png", np.zeros((8, 8, 3), dtype=np.uint8))
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path), "-o", str(tmp_path / ".")]
    assert cli.main(argv) == EXIT_USAGE
    assert "--output" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["-o", "o.png", "--quality", "80"], "--quality is for JPEG, WebP and AVIF outputs"),
        (["-o", "o.bmp", "--quality", "80"], "--quality is for JPEG, WebP and AVIF outputs"),
        (["-o", "o.tiff", "--quality", "80"], "TIFF are lossless"),
        (["-o", "o.png", "--execution-provider", "cuda"], "--execution-provider cuda runs ONNX"),
    ],
)
def test_swap_options_that_would_do_nothing(
    extra: list[str],
    fragment: str,
    small_files: dict[str, bytes],
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["swap", "-s", "s.png", "-t", "t.png", *extra]) == EXIT_USAGE
    assert fragment in capsys.readouterr().err
    # A folder with a JPEG among its PNGs takes --quality for it (no usage error).
    assert cli.main(["swap", "-s", "s.png", "-t", "tg", "-o", "out", "--quality", "80"]) != 2


def test_skip_existing_is_for_a_folder(
    small_files: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swap", "-s", "s.png", "-t", "t.png", "-o", str(tmp_path / "o.png")]
    assert cli.main([*argv, "--skip-existing"]) == EXIT_USAGE
    assert "--skip-existing is for a folder --target" in capsys.readouterr().err


def test_batch_of_empty_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "in").mkdir()
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path / "in"), "-o", str(tmp_path / "out")]
    assert cli.main(argv) == EXIT_ERROR
    assert "no images" in capsys.readouterr().err


def test_a_batch_that_fails_before_any_output_leaves_no_folder_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source without a face (exit 3): the output folder the run made goes again;
    one that was there before stays."""
    (tmp_path / "in").mkdir()
    grey = np.full((64, 64, 3), 128, np.uint8)
    write_image(tmp_path / "in" / "t.png", grey)
    write_image(tmp_path / "grey.png", grey)
    (tmp_path / "kept").mkdir()
    for out in ("new/out", "kept"):
        argv = ["swap", "-s", str(tmp_path / "grey.png"), "-t", str(tmp_path / "in")]
        assert cli.main([*argv, "-o", str(tmp_path / out)]) == EXIT_NO_FACE
        assert "no face found in the source" in capsys.readouterr().err
    assert not (tmp_path / "new" / "out").exists()
    assert (tmp_path / "kept").is_dir()


def test_keyboard_interrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    write_image(tmp_path / "t.png", np.zeros((8, 8, 3), dtype=np.uint8))
    monkeypatch.setattr(cli, "read_image", interrupted)
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path / "t.png"), "-o", str(tmp_path / "o.png")]
    assert cli.main(argv) == 130
    assert capsys.readouterr().err == "faceweave: interrupted\n"


@pytest.mark.parametrize("debug", [False, True])
def test_unexpected_error_is_one_line_unless_debugging(
    debug: bool,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom\non two lines")

    write_image(tmp_path / "t.png", np.zeros((8, 8, 3), dtype=np.uint8))
    monkeypatch.setattr(cli, "read_image", broken)
    if debug:
        monkeypatch.setenv("FACEWEAVE_DEBUG", "1")
    else:
        monkeypatch.delenv("FACEWEAVE_DEBUG", raising=False)
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path / "t.png"), "-o", str(tmp_path / "o.png")]
    assert cli.main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.endswith("faceweave: internal error: RuntimeError: boom on two lines\n")
    assert ("Traceback" in err) is debug


def test_defaults_live_in_module_constants() -> None:
    args = cli.build_parser().parse_args(["swap", "-s", "a", "-t", "b", "-o", "c.png"])
    assert args.fusion == cli.DEFAULT_FUSION
    assert args.color == cli.DEFAULT_COLOR
    assert args.blend == cli.DEFAULT_BLEND
    assert args.gaze == cli.DEFAULT_GAZE == "target"
    assert args.detail == cli.DEFAULT_DETAIL
    assert args.face_order == cli.DEFAULT_FACE_ORDER
    assert args.max_faces == cli.DEFAULT_MAX_FACES
    assert args.mask_mouth is cli.DEFAULT_MASK_MOUTH
    assert args.mask_lips is cli.DEFAULT_MASK_LIPS is False
    assert args.mask_eyes is cli.DEFAULT_MASK_EYES
    assert args.mask_glasses is cli.DEFAULT_MASK_GLASSES is True
    assert args.quality is None  # absent: DEFAULT_QUALITY for images (videos take --crf)
    assert args.max_pixels == cli.DEFAULT_MAX_PIXELS
    no_mouth = cli.build_parser().parse_args(
        ["swap", "-s", "a", "-t", "b", "-o", "c.png", "--no-mask-mouth", "--mask-eyes"]
        + ["--no-mask-glasses"]
    )
    assert no_mouth.mask_mouth is False and no_mouth.mask_eyes is True
    assert no_mouth.mask_glasses is False
    assert SwapOptions.from_settings(no_mouth).mask_glasses is False
    eye_contact = cli.build_parser().parse_args(
        ["swap", "-s", "a", "-t", "b", "-o", "c.png", "--gaze", "source"]
    )
    assert SwapOptions.from_settings(eye_contact).gaze == "source"
    for command in (["swap", "-o", "c.png", "-t", "b"], ["live"]):
        lips = cli.build_parser().parse_args([*command, "-s", "a", "--mask-lips"])
        assert SwapOptions.from_settings(lips).mask_lips is True, command
        hands = cli.build_parser().parse_args([*command, "-s", "a", "--mask-hands"])
        assert SwapOptions.from_settings(hands).mask_hands is True, command
    assert args.mask_hands is cli.DEFAULT_MASK_HANDS is False
    assert args.mask_padding == cli.DEFAULT_MASK_PADDING == (0.0, 0.0, 0.0, 0.0)
    assert args.feather == cli.DEFAULT_FEATHER


@pytest.mark.parametrize(
    ("values", "sides"),
    [
        (["0.1"], (0.1, 0.1, 0.1, 0.1)),
        (["0.1", "0.2"], (0.1, 0.2, 0.1, 0.2)),
        (["0", "0", "0.2", "0"], (0.0, 0.0, 0.2, 0.0)),
    ],
)
def test_mask_padding_takes_one_two_or_four_sides(values: list[str], sides: tuple) -> None:
    base = ["swap", "-s", "a", "-t", "b", "-o", "c.png"]
    args = cli.build_parser().parse_args([*base, "--mask-padding", *values, "--feather", "0.05"])
    assert args.mask_padding == sides
    options = SwapOptions.from_settings(args)
    assert options.mask_padding == sides and options.feather == 0.05


@pytest.mark.parametrize(
    "values", [["0", "0", "0.2"], ["1.5"], ["x"], ["0.1", "--mask-padding", "0.2"]]
)
def test_mask_padding_usage_errors(values: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    base = ["swap", "-s", "a", "-t", "b", "-o", "c.png"]
    with pytest.raises(SystemExit) as exit_info:
        cli.build_parser().parse_args([*base, "--mask-padding", *values])
    assert exit_info.value.code == 2
    assert "--mask-padding" in capsys.readouterr().err


@pytest.fixture
def small_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Tiny images in the working directory (tmp_path): s.png, r.png, t.png, tg/a.png,
    tg/a.jpg and tg/b.png; returns every file's bytes, to check none changed."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tg").mkdir()
    for name, grey in (("s.png", 10), ("r.png", 20), ("t.png", 30), ("tg/a.png", 40)):
        write_image(tmp_path / name, np.full((16, 16, 3), grey, dtype=np.uint8))
    write_image(tmp_path / "tg/a.jpg", np.full((16, 16, 3), 50, dtype=np.uint8))
    write_image(tmp_path / "tg/b.png", np.full((16, 16, 3), 60, dtype=np.uint8))
    return _all_bytes(tmp_path)


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["-s", "s.png", "-t", "t.png", "-o", "t.png"],
            "--output t.png would overwrite the --target",
        ),
        (["-s", "s.png", "-t", "t.png", "-o", "."], "would overwrite the --target image"),
        (["-s", "s.png", "-t", "t.png", "-o", "./s.png"], "would overwrite a --source image"),
        (["-s", "s.png", "-t", "t.png", "-o", "o.png", "--debug", "t.png"], "--debug t.png"),
        (["-s", "s.png", "-t", "t.png", "-o", "o.png", "--debug", "o.png"], "--output file"),
        (
            ["-s", "s.png", "-t", "t.png", "-o", "r.png", "--reference-face", "r.png"],
            "would overwrite the --reference-face image",
        ),
        (["--map", "s.png=r.png", "-t", "t.png", "-o", "r.png"], "a --map reference"),
        (["-s", "s.png", "-t", "tg", "-o", "out", "--debug", "tg"], "--target directory"),
        (["-s", "s.png", "-t", "tg", "-o", "out", "--debug", "out"], "--output directory"),
        # A batch into its own folder (refused before this landing too).
        (["-s", "tg/a.png", "-t", "tg", "-o", "tg"], "--target directory"),
        # A batch's output folder holding a source under a target's name.
        (["-s", "a.png", "-t", "tg", "-o", "."], "--output a.png would overwrite a --source"),
    ],
)
def test_outputs_never_replace_inputs(
    argv: list[str],
    fragment: str,
    small_files: dict[str, bytes],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if argv[1] == "a.png":
        (tmp_path / "a.png").write_bytes(small_files["s.png"])
        small_files = _all_bytes(tmp_path)
    assert cli.main(["swap", *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("faceweave: error: ") and fragment in err, err
    assert _all_bytes(tmp_path) == small_files  # nothing written, nothing replaced
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (
            ["-s", "s.png", "-s", "t.png", "-t", "t.png", "-o", "o.png"],
            "--source/-s is given more than once: several photos of one person go after one "
            "-s (-s a.jpg b.jpg); several people, each onto their own face: --map SRC=REF",
        ),
        (["-s", "s.png", "-t", "t.png", "-t", "tg", "-o", "o.png"], "--target/-t is given"),
        (["-s", "s.png", "-t", "t.png", "-o", "o.png", "--output", "p.png"], "--output/-o is"),
    ],
)
def test_a_source_target_or_output_given_twice_is_a_usage_error(
    argv: list[str],
    fragment: str,
    small_files: dict[str, bytes],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The first had been dropped without a word (``live`` takes ``-s`` again as
    another person: an easy slip)."""
    assert cli.main(["swap", *argv]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err, err
    assert _all_bytes(tmp_path) == small_files


def test_analyse_debug_never_replaces_the_image(
    small_files: dict[str, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["analyse", "t.png", "--debug", str(tmp_path / "t.png")]) == EXIT_USAGE
    assert "would overwrite the image analysed" in capsys.readouterr().err
    # A debug image no image is written as: a usage error, as swap's --debug (it had been 1).
    assert cli.main(["analyse", "t.png", "--debug", str(tmp_path / "x.gif")]) == EXIT_USAGE
    assert "--debug " in capsys.readouterr().err
    assert _all_bytes(tmp_path) == small_files


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (["--input", "clip.mp4", "--output", "clip.mp4"], EXIT_USAGE, "the --input video"),
        (["--input", "clip.mp4", "--output", "o.mp4", "--stats", "s.png"], EXIT_USAGE, "--stats"),
        (["--input", "clip.mp4", "--output", "o.mp4", "--stats", "o.mp4"], EXIT_USAGE, "--stats"),
        (["--input", "clip.mp4", "--output", "o.mp4", "--stats", "tg"], EXIT_ERROR, "directory"),
        (["--input", "clip.mp4", "--output", "o.mp4", "--duration", "1e10"], EXIT_USAGE, "at most"),
        (["--camera", "0", "--output", "o.mp4", "--fps", "1e10"], EXIT_USAGE, "at most 1000"),
        (["--input", "clip.mp4", "--output", "no/o.mp4"], EXIT_ERROR, "directory no does not"),
        # Options that would do nothing.
        (
            ["--input", "clip.mp4", "--output", "udp://127.0.0.1:9", "--no-watermark"],
            EXIT_USAGE,
            "--no-watermark is for a recording",
        ),
        (
            ["--input", "clip.mp4", "--output", "o.mp4", "--execution-provider", "cuda"],
            EXIT_USAGE,
            "--execution-provider cuda runs ONNX models",
        ),
        # An option given twice (the last one had been kept without a word).
        (
            ["--input", "clip.mp4", "--output", "o.mp4", "--fusion", "0.5", "--fusion", "0.7"],
            EXIT_USAGE,
            "--fusion is given more than once",
        ),
        (["--input", "clip.mp4", "-o", "a.mp4", "-o", "b.mp4"], EXIT_USAGE, "more than once"),
        # A switch too (--mirror --mirror, --mask-lips --no-mask-lips had been taken).
        (
            ["--input", "clip.mp4", "-o", "a.mp4", "--mirror", "--mirror"],
            EXIT_USAGE,
            "more than once",
        ),
        (
            ["--input", "clip.mp4", "-o", "a.mp4", "--mask-lips", "--no-mask-lips"],
            EXIT_USAGE,
            "--mask-lips/--no-mask-lips is given more than once",
        ),
        # A URL as --input had been folded into a path ("http:/host/x.mp4: no such file"),
        # a file as --camera read as fast as it decodes (most frames dropped).
        (
            ["--input", "http://127.0.0.1:9/x.mp4", "--output", "o.mp4"],
            EXIT_USAGE,
            "a network camera or stream goes to --camera",
        ),
        (["--camera", "clip.mp4", "--output", "o.mp4"], EXIT_USAGE, "play it with --input"),
        # An output no video is written in, or a UDP address without a port: usage
        # errors before any model loads (they had been exit 1, the UDP one after them).
        (["--input", "clip.mp4", "--output", "s.png"], EXIT_USAGE, "unsupported video format"),
        (["--input", "clip.mp4", "--output", "udp://127.0.0.1"], EXIT_USAGE, "give the port"),
        (
            ["--input", "clip.mp4", "--output", "o.mp4", "--reference-distance", "0.5"],
            EXIT_USAGE,
            "--reference-distance is for a reference face (--reference-face)",
        ),
    ],
)
def test_live_refuses_overwrites_and_huge_values(
    argv: list[str],
    code: int,
    fragment: str,
    small_files: dict[str, bytes],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "clip.mp4").write_bytes(b"not decoded: the checks come first")
    before = _all_bytes(tmp_path)
    assert cli.main(["live", "-s", "s.png", *argv]) == code
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err
    assert _all_bytes(tmp_path) == before


def test_batch_overlays_of_targets_sharing_a_name() -> None:
    plan = cli._batch_plan(
        [Path("in/a.jpg"), Path("in/a.png"), Path("in/b.png")], Path("out"), Path("dbg")
    )
    assert [output for _, output, _ in plan] == [
        Path("out/a.jpg"),
        Path("out/a.png"),
        Path("out/b.png"),
    ]
    assert all(overlay is not None and overlay.parent == Path("dbg") for _, _, overlay in plan)
    names = {target: overlay.name for target, _, overlay in plan if overlay is not None}
    assert names == {
        Path("in/a.jpg"): "a.jpg.png",
        Path("in/a.png"): "a.png.png",
        Path("in/b.png"): "b.png",
    }


def test_batch_heic_photos_beside_their_jpegs() -> None:
    """An iPhone folder often holds IMG_1.HEIC and the IMG_1.JPG made of it: the HEIC's
    JPEG output must not replace the JPEG's (nor the JPEG's it)."""
    targets = [Path("in/IMG_1.HEIC"), Path("in/IMG_1.JPG"), Path("in/IMG_2.heic")]
    plan = cli._batch_plan(targets, Path("out"), None)
    assert [output for _, output, _ in plan] == [
        Path("out/IMG_1.HEIC.jpg"),
        Path("out/IMG_1.JPG"),
        Path("out/IMG_2.jpg"),
    ]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_stop_signals_end_a_command_as_ctrl_c_does(
    signum: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def stopped(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signum)  # the handler runs before the next line

    before = signal.getsignal(signum)
    write_image(tmp_path / "t.png", np.zeros((8, 8, 3), dtype=np.uint8))
    monkeypatch.setattr(cli, "read_image", stopped)
    argv = ["swap", "-s", "a.png", "-t", str(tmp_path / "t.png"), "-o", str(tmp_path / "o.png")]
    assert cli.main(argv) == 128 + signum
    assert capsys.readouterr().err == f"faceweave: stopped by {signal.Signals(signum).name}\n"
    assert signal.getsignal(signum) == before  # the handler is this command's only


def test_help_names_only_options_its_command_has(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command's help mentions only its own options (live's had swap's
    --face-order), apart from named references to another command's."""
    monkeypatch.setenv("COLUMNS", "10000")  # no option name broken over two lines
    elsewhere = {
        ("analyse", "--reference-frame"),
        ("analyse", "--reference-position"),
        ("analyse", "--mask-hands"),
    }
    commands = next(
        action
        for action in cli.build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    for name, parser in commands.choices.items():
        own = {option for action in parser._actions for option in action.option_strings}
        named = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", parser.format_help()))
        named -= {f"--no-{option[2:]}" for option in own} | own
        base = "analyse" if name == "analyze" else name
        assert {option for option in named if (base, option) not in elsewhere} == set(), name


def test_ctrl_c_while_the_command_loads(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C while the command line's modules load is held back until they have
    loaded (raised inside an import it could surface as numpy's ImportError), then
    ends the program as an interrupt does; the command does not run."""
    ran: list[object] = []

    def pressed_while_loading(name: str) -> object:
        os.kill(os.getpid(), signal.SIGINT)
        return lambda argv=None: ran.append(argv) or 0

    loading = types.ModuleType("faceweave.apps.cli")
    loading.__getattr__ = pressed_while_loading  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, "faceweave.apps.cli", loading)
    assert launcher.main(["--help"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "faceweave: interrupted\n"
    assert ran == []
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_at_start_is_one_line(tmp_path: Path) -> None:
    """Ctrl-C while numpy and OpenCV load (the first half second) ends without a traceback.

    ``-X importtime`` reports each import on stderr as it ends: the signal goes with
    the first of numpy's own modules.
    """
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-X", "importtime", "-m", "faceweave", "analyse", "x.png"]
    with subprocess.Popen(
        command, cwd=tmp_path, env=environment, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if re.search(r"\| +numpy\.", line):  # a first module inside numpy has loaded
                process.send_signal(signal.SIGINT)
                break
        rest = process.stderr.read()
        returncode = process.wait(timeout=TIMEOUT_S)
    stderr = "".join(lines) + rest
    assert "Traceback" not in stderr, stderr[-2000:]
    assert returncode == 130
    assert stderr.rstrip().endswith("faceweave: interrupted")


def test_a_reader_that_leaves_ends_the_command_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``faceweave analyse x.jpg | head -1``: no "error: Broken pipe" line."""

    def reader_gone(args: object) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli, "_run_verify", reader_gone)
    monkeypatch.setattr(cli.os, "dup2", lambda fd, fd2: None)  # keep the test's stdout
    assert cli.main(["verify", "x.png"]) == 141
    assert capsys.readouterr().err == ""


def test_file_system_refusals_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_name = tmp_path / ("a" * 300 + ".png")
    for argv in (
        ["analyse", str(long_name)],
        ["verify", str(long_name)],
        ["swap", "-s", str(long_name), "-t", str(long_name), "-o", str(tmp_path / "o.png")],
    ):
        assert cli.main(argv) == EXIT_ERROR
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("faceweave: error: "), err
        assert "internal error" not in err and "name too long" in err.lower(), err


# --- end to end, in a subprocess -------------------------------------------------------------


@pytest.mark.slow
def test_several_photos_of_one_source() -> None:
    """One --source takes one person's photos; live repeats --source for switches."""
    swap = cli.build_parser().parse_args(["swap", "-s", "a", "b", "-t", "t", "-o", "o.png"])
    assert swap.source == [Path("a"), Path("b")]
    live = cli.build_parser().parse_args(["live", "-s", "a", "b", "-s", "c"])
    assert live.source == [[Path("a"), Path("b")], [Path("c")]]


def test_missing_source(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    result = _run("swap", "-s", "nope.png", "-t", images.target_png, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_ERROR
    _assert_one_error_line(result, "nope.png", "no such file")
    assert result.stderr.strip() == result.message_lines[0]
    assert not output.exists()


def test_a_truncated_target_is_said_before_the_source_is_analysed(
    images: Images, tmp_path: Path
) -> None:
    """Grace Hopper as the source gets a line of advice (her glasses) once analysed: a
    broken target had been found only after it, and after the models loaded."""
    target = tmp_path / "cut.png"
    target.write_bytes(images.source_png.read_bytes()[:200])
    output = tmp_path / "out.png"
    result = _run("swap", "-s", images.target_png, "-t", target, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_ERROR
    _assert_one_error_line(result, "cut.png", "truncated")
    assert result.stderr.strip() == result.message_lines[0]  # no advice on the source
    assert not output.exists()


def test_target_too_small_names_the_file(images: Images, tmp_path: Path) -> None:
    # Readable, but under the analysis's 8 px minimum: the error names the file, as
    # every other error about a target does.
    target = tmp_path / "strip.png"
    Image.new("RGB", (600, 4), "white").save(target)
    output = tmp_path / "out.png"
    result = _run("swap", "-s", images.source_png, "-t", target, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_ERROR
    _assert_one_error_line(result, "strip.png", "image too small: 600x4")
    assert not output.exists()
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
def test_fusion_out_of_range_is_usage_error(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", output,
        "--fusion", "1.5", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_USAGE
    assert "--fusion" in result.stderr
    assert "Traceback" not in result.stderr
    assert not output.exists()


@pytest.mark.slow
def test_analyse_json(images: Images, target_faces: list[dict]) -> None:
    assert len(target_faces) >= 1
    height, width = read_image(images.target_png).shape[:2]
    face = target_faces[0]
    x0, y0, x1, y1 = face["bbox"]
    assert 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height
    assert 0.0 <= face["score"] <= 1.0
    assert set(face["pose"]) == {"yaw", "pitch", "roll"}
    assert np.asarray(face["landmarks_5"]).shape == (5, 2)
    assert "landmarks_478" not in face


def test_analyse_an_upside_down_photo(images: Images, tmp_path: Path) -> None:
    """A photo the wrong way up: the face is found upside down, or, with
    ``--detector-angles 0``, looked for upright only (and misread)."""
    turned = tmp_path / "turned.png"
    write_image(turned, np.rot90(read_image(images.target_png), 2).copy())
    found = _run("analyse", turned, "--json", cwd=tmp_path)
    assert found.returncode == EXIT_OK, found.stderr
    (face,) = json.loads(found.stdout)
    assert abs(face["pose"]["roll"]) > 160
    upright = _run("analyse", turned, "--json", "--detector-angles", "0", cwd=tmp_path)
    faces = json.loads(upright.stdout) if upright.returncode == EXIT_OK else []
    assert all(abs(f["pose"]["roll"]) < 160 for f in faces)


def test_detector_angles_are_the_targets_not_the_sources(images: Images, tmp_path: Path) -> None:
    """``--detector-angles 180`` for an upside-down target: the upright source photo is
    still found (it had been "no face found in the source image", exit 3)."""
    turned = tmp_path / "turned.png"
    write_image(turned, np.rot90(read_image(images.target_png), 2).copy())
    output = tmp_path / "out.png"
    run = _run(
        "swap", "-s", images.source_png, "-t", turned, "-o", output,
        "--detector-angles", "180", cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == EXIT_OK, run.stderr
    assert np.abs(read_image(output).astype(int) - read_image(turned)).max() > 50


@pytest.mark.slow
def test_analyse_a_face_cut_by_the_frame(images: Images, tmp_path: Path) -> None:
    """Stills are also searched for faces cut by the frame's side: the astronaut with
    the right three fifths of her face out of the frame."""
    photo = read_image(images.source_png)
    cut = tmp_path / "cut.png"
    write_image(cut, np.ascontiguousarray(photo[:, :216]))  # her face spans x 179-271
    found = _run("analyse", cut, "--json", cwd=tmp_path)
    assert found.returncode == EXIT_OK, found.stderr
    (face,) = json.loads(found.stdout)
    assert face["bbox"][0] > 150 and face["bbox"][2] > 216  # reaching out of the frame


@pytest.mark.slow
def test_analyze_alias_with_landmarks_and_debug(images: Images, tmp_path: Path) -> None:
    debug = tmp_path / "debug.png"
    result = _run(
        "analyze", images.target_jpg, "--json", "--landmarks", "--debug", debug, cwd=tmp_path
    )
    assert result.returncode == EXIT_OK, result.stderr
    faces = json.loads(result.stdout)
    assert np.asarray(faces[0]["landmarks_478"]).shape == (478, 3)
    assert debug.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read_image(debug).shape == read_image(images.target_jpg).shape
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
def test_analyse_lists_the_hands_round_each_face(
    images: Images, shared_faces: Path, tmp_path: Path
) -> None:
    """``analyse --hands``: each face's record lists the hands round it (none round
    Grace Hopper's; Chandler's fist round his face in the Friends photo), the text
    output a line under the face, and --debug outlines it; without --hands no key."""
    plain = _run("analyse", images.target_png, "--json", cwd=tmp_path)
    assert plain.returncode == EXIT_OK, plain.stderr
    assert "hands" not in json.loads(plain.stdout)[0]
    none = _run("analyse", images.target_png, "--json", "--hands", cwd=tmp_path)
    assert none.returncode == EXIT_OK, none.stderr
    assert [record["hands"] for record in json.loads(none.stdout)] == [[]]
    friends = shared_faces / "img_p05_friends_multiface.jpg"
    debug = tmp_path / "hands.png"
    found = _run("analyse", friends, "--json", "--hands", "--debug", debug, cwd=tmp_path)
    assert found.returncode == EXIT_OK, found.stderr
    records = json.loads(found.stdout)
    chandler = min(records, key=lambda r: abs(r["bbox"][0] - 418) + abs(r["bbox"][1] - 145))
    assert len(chandler["hands"]) == 1
    hand = chandler["hands"][0]
    assert len(hand["landmarks"]) == 21 and hand["side"] in ("left", "right")
    assert hand["landmarks"][0][1] > chandler["bbox"][3] - 30  # the wrist under the chin
    overlay = read_image(debug).astype(np.int16)
    magenta = (overlay[..., 0] > 200) & (overlay[..., 1] < 60) & (overlay[..., 2] > 200)
    assert magenta[180:290, 450:540].sum() > 50
    text = _run("analyse", friends, "--hands", cwd=tmp_path)
    assert text.returncode == EXIT_OK, text.stderr
    assert "  hand (" in text.stdout


@pytest.mark.slow
def test_analyse_text_and_no_face(images: Images, tmp_path: Path) -> None:
    result = _run("analyse", images.target_png, cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    assert "face 0: box" in result.stdout
    result = _run("analyse", images.grey_png, "--json", cwd=tmp_path)
    assert result.returncode == EXIT_NO_FACE
    assert json.loads(result.stdout) == []
    _assert_one_error_line(result, "no face")


@pytest.mark.slow
def test_swap_image_to_image(images: Images, target_faces: list[dict], tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    debug = tmp_path / "debug.png"
    result = _run(
        "swap", "--source", images.source_png, "--target", images.target_png,
        "--output", output, "--debug", debug, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    assert result.message_lines == []  # nothing on stderr, not even library logs
    target = read_image(images.target_png)
    swapped = read_image(output)
    assert swapped.shape == target.shape
    difference = np.abs(swapped.astype(np.int16) - target.astype(np.int16)).max(axis=2)
    x0, y0, x1, y1 = _face_box(target_faces, target.shape)
    assert difference[y0:y1, x0:x1].mean() > 3.0  # the face changed
    far = _far_from_face((x0, y0, x1, y1), target.shape)
    assert difference[far].mean() < 0.5  # the rest did not
    assert np.mean(difference[far] > 2) < 0.01
    assert debug.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    _assert_no_temp_files(tmp_path, images.root)


@pytest.mark.slow
def test_swap_keeps_a_hand_in_front_of_the_face(
    images: Images, shared_faces: Path, tmp_path: Path
) -> None:
    """``--mask-hands`` end to end: Chandler's fist under his chin (img_p05) keeps its
    pixels where the plain swap paints the astronaut's jaw over its knuckles."""
    target = shared_faces / "img_p05_friends_multiface.jpg"
    outputs = {}
    debug = tmp_path / "debug.png"
    for name, flags in (("plain", []), ("kept", ["--mask-hands", "--debug", str(debug)])):
        outputs[name] = tmp_path / f"{name}.png"
        result = _run(
            "swap", "-s", images.source_png, "-t", target, "-o", outputs[name],
            "--face-selector", "many", *flags, cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == EXIT_OK, result.stderr
    frame = read_image(target)
    plain, kept = read_image(outputs["plain"]), read_image(outputs["kept"])
    # His knuckles at the jaw (the hand found there: see tests/analysis/test_hand_finder.py).
    knuckles = (slice(210, 225), slice(485, 495))
    frame_part = frame[knuckles].astype(np.int16)
    assert np.abs(plain[knuckles] - frame_part).max() > 20
    assert np.abs(kept[knuckles] - frame_part).max() <= 2
    # The --debug overlay outlines the hand kept (magenta) round his knuckles.
    overlay = read_image(debug).astype(np.int16)
    magenta = (overlay[..., 0] > 200) & (overlay[..., 1] < 60) & (overlay[..., 2] > 200)
    assert magenta[180:290, 450:540].sum() > 50
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
def test_swap_says_how_little_of_a_profile_is_swapped(
    images: Images, shared_faces: Path, tmp_path: Path
) -> None:
    """Onto a profile (p15, a 90-degree one the mesh reads as 55) the engine swaps only
    the near brow, temple and cheek: a note says so, naming the face; a frontal target
    gets none."""
    target = shared_faces / "img_p15_aflw_profile_man.jpg"
    output = tmp_path / "out.png"
    result = _run("swap", "-s", images.source_png, "-t", target, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    (note,) = [line for line in result.message_lines if "profile" in line]
    assert note.startswith(f"faceweave: {target}: the face at (")
    assert "is seen in profile (read as turned 5" in note
    assert "only its near brow, temple and cheek take the source" in note
    frontal = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", output, cwd=tmp_path
    )
    assert frontal.returncode == EXIT_OK and "profile" not in frontal.stderr


@pytest.mark.slow
def test_swap_warns_about_a_small_source_face(images: Images, tmp_path: Path) -> None:
    """A source whose face is under 64 px still swaps, with one warning line saying why
    the result will be soft."""
    small = tmp_path / "small.png"
    Image.open(images.source_png).resize((256, 256), Image.Resampling.LANCZOS).save(small)
    output = tmp_path / "out.png"
    result = _run("swap", "-s", small, "-t", images.target_png, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    assert len(result.message_lines) == 1, result.stderr
    line = result.message_lines[0]
    assert line.startswith("faceweave: warning: source face is only "), line
    assert "px wide" in line
    assert read_image(output).shape == read_image(images.target_png).shape


@pytest.mark.slow
def test_swap_says_which_face_of_a_group_source_it_uses(images: Images, tmp_path: Path) -> None:
    """A source photo with two people: the larger face is used, and a warning says so
    (it had been used without a word)."""
    astronaut, hopper = read_image(images.source_png), read_image(images.target_png)
    pair = np.full((hopper.shape[0], astronaut.shape[1] + hopper.shape[1], 3), 127, np.uint8)
    pair[: astronaut.shape[0], : astronaut.shape[1]] = astronaut
    pair[:, astronaut.shape[1] :] = hopper
    group = tmp_path / "group.png"
    write_image(group, pair)
    output = tmp_path / "out.png"
    result = _run("swap", "-s", group, "-t", images.source_png, "-o", output, cwd=tmp_path)
    assert result.returncode == EXIT_OK, result.stderr
    warned = [line for line in result.message_lines if "faces in the source image" in line]
    assert warned == [
        f"faceweave: warning: {group}: 2 faces in the source image; the largest is used "
        "(crop the photo to use another)"
    ], result.stderr


@pytest.mark.slow
def test_swap_merges_several_source_photos(images: Images, tmp_path: Path) -> None:
    """``-s a.png b.png``: several photos of one person make one source. Two different
    people are merged too, with one warning line that says so."""
    small = tmp_path / "small.png"
    Image.open(images.source_png).resize((384, 384), Image.Resampling.LANCZOS).save(small)
    output = tmp_path / "out.png"
    same = _run(
        "swap", "-s", images.source_png, small, "-t", images.target_png, "-o", output,
        cwd=tmp_path,
    )  # fmt: skip
    assert same.returncode == EXIT_OK, same.stderr
    assert same.message_lines == []
    swapped = read_image(output)
    assert np.abs(swapped.astype(int) - read_image(images.target_png)).mean() > 1.0
    mixed = tmp_path / "mixed.png"
    other = _run(
        "swap", "-s", images.source_png, images.target_jpg, "-t", images.target_png,
        "-o", mixed, cwd=tmp_path,
    )  # fmt: skip
    assert other.returncode == EXIT_OK, other.stderr
    # Only the mix: what the second photo shows (Grace's glasses) is not what the swap
    # shows, so its advice is not printed.
    assert len(other.message_lines) == 1, other.stderr
    assert "looks like another person" in other.message_lines[0]
    assert mixed.exists()


@pytest.mark.slow
def test_swap_to_jpeg_output_keeps_extension_format(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.jpg"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_jpg, "-o", output,
        "--quality", "80", "--color", "rct", "--blend", "alpha", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    assert output.read_bytes()[:2] == b"\xff\xd8"
    assert read_image(output).shape == read_image(images.target_jpg).shape


@pytest.mark.slow
def test_fusion_zero_returns_the_target(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", output,
        "--fusion", "0", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    target = read_image(images.target_png).astype(np.int16)
    assert np.abs(read_image(output).astype(np.int16) - target).max() <= 1


@pytest.mark.slow
def test_source_without_face(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    result = _run(
        "swap", "-s", images.grey_png, "-t", images.target_png, "-o", output, cwd=tmp_path
    )
    assert result.returncode == EXIT_NO_FACE
    _assert_one_error_line(result, "grey.png", "no face")
    assert not output.exists()


@pytest.mark.slow
def test_target_without_face(images: Images, tmp_path: Path) -> None:
    output = tmp_path / "out.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.grey_png, "-o", output, cwd=tmp_path
    )
    assert result.returncode == EXIT_NO_FACE
    _assert_one_error_line(result, "grey.png", "no face")
    assert not output.exists()

    result = _run(
        "swap", "-s", images.source_png, "-t", images.grey_png, "-o", output,
        "--skip-no-face", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    assert result.message_lines == [
        f"faceweave: {images.grey_png}: no face found; written unchanged"
    ]
    np.testing.assert_array_equal(read_image(output), read_image(images.grey_png))
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
def test_unwritable_output(images: Images, tmp_path: Path) -> None:
    (tmp_path / "a_file").write_text("not a directory")
    output = tmp_path / "a_file" / "out.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", output, cwd=tmp_path
    )
    assert result.returncode == EXIT_ERROR
    _assert_one_error_line(result, "out.png")
    assert not output.exists()
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions"
)
def test_read_only_output_directory(images: Images, tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        result = _run(
            "swap", "-s", images.source_png, "-t", images.target_png, "-o", locked / "out.png",
            cwd=tmp_path,
        )  # fmt: skip
        assert result.returncode == EXIT_ERROR
        _assert_one_error_line(result, "out.png")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


@pytest.mark.slow
def test_batch_with_a_corrupt_file(images: Images, tmp_path: Path) -> None:
    batch = tmp_path / "in"
    batch.mkdir()
    shutil.copyfile(images.target_png, batch / "a.png")
    (batch / "b_broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + os.urandom(300))
    shutil.copyfile(images.target_jpg, batch / "c.jpg")
    (batch / "notes.txt").write_text("not an image, not processed")
    output_dir = tmp_path / "out" / "nested"
    result = _run(
        "swap", "-s", images.source_png, "-t", batch, "-o", output_dir, cwd=tmp_path
    )  # progress bar on, to check error lines survive it
    assert result.returncode == EXIT_ERROR
    assert "Traceback" not in result.stderr, result.stderr
    # What is left out, the error, and a summary at the end.
    note, error, summary = result.message_lines
    assert note == "faceweave: left out, not images or videos: notes.txt", note
    assert error.startswith("faceweave: error: ") and "b_broken.png" in error, error
    assert summary == f"faceweave: 2 of 3 file(s) swapped into {output_dir} (1 failed)"
    assert sorted(p.name for p in output_dir.iterdir()) == ["a.png", "c.jpg"]
    assert (output_dir / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (output_dir / "c.jpg").read_bytes()[:2] == b"\xff\xd8"
    assert read_image(output_dir / "a.png").shape == read_image(images.target_png).shape
    _assert_no_temp_files(tmp_path)

    # Run again with --skip-existing: the outputs there are left, the rest is tried.
    (output_dir / "c.jpg").unlink()
    kept = (output_dir / "a.png").stat().st_mtime_ns
    again = _run(
        "swap", "-s", images.source_png, "-t", batch, "-o", output_dir, "--skip-existing",
        cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == EXIT_ERROR
    assert again.message_lines[1] == "faceweave: 1 of 3 outputs exist already: left as they are"
    assert again.message_lines[-1] == (
        f"faceweave: 1 of 2 file(s) swapped into {output_dir} (1 failed, 1 done before)"
    )
    assert (output_dir / "a.png").stat().st_mtime_ns == kept
    assert sorted(p.name for p in output_dir.iterdir()) == ["a.png", "c.jpg"]


@pytest.mark.slow
def test_batch_exit_code_and_skip_no_face(images: Images, tmp_path: Path) -> None:
    batch = tmp_path / "in"
    batch.mkdir()
    shutil.copyfile(images.target_png, batch / "face.png")
    shutil.copyfile(images.grey_png, batch / "grey.png")
    result = _run(
        "swap", "-s", images.source_png, "-t", batch, "-o", tmp_path / "out", "--quiet",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_NO_FACE
    _assert_one_error_line(result, "grey.png", "no face")
    assert "it/s" not in result.stderr and "image/s" not in result.stderr  # --quiet: no bar
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["face.png"]

    result = _run(
        "swap", "-s", images.source_png, "-t", batch, "-o", tmp_path / "out2", "--quiet",
        "--skip-no-face", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    assert sorted(p.name for p in (tmp_path / "out2").iterdir()) == ["face.png", "grey.png"]
    _assert_no_temp_files(tmp_path)


@pytest.mark.slow
def test_a_folder_of_iphone_photos(images: Images, tmp_path: Path) -> None:
    """A folder's HEIC photos (an iPhone's) are read, swapped and written as JPEG
    (no HEVC encoder here), marked, beside its other images in their own formats."""
    photos = tmp_path / "photos"
    photos.mkdir()
    heic = Path(__file__).resolve().parents[1] / "io" / "data" / "astronaut.heic"
    (photos / "IMG_0001.HEIC").write_bytes(heic.read_bytes())
    Image.open(images.target_png).save(photos / "hopper.png")
    result = _run(
        "swap", "-s", images.source_png, "-t", "photos", "-o", "swapped", cwd=tmp_path, marked=True
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    assert sorted(p.name for p in (tmp_path / "swapped").iterdir()) == [
        "IMG_0001.jpg",
        "hopper.png",
    ]
    with Image.open(tmp_path / "swapped" / "IMG_0001.jpg") as out:
        assert out.format == "JPEG" and out.size == (256, 256)
    swapped = read_image(tmp_path / "swapped" / "IMG_0001.jpg").astype(int)
    assert np.abs(swapped - read_image(photos / "IMG_0001.HEIC").astype(int)).mean() > 1
    report = _run("verify", "swapped/IMG_0001.jpg", cwd=tmp_path)
    assert report.returncode == EXIT_OK and "FOUND" in report.stdout, report.stdout
    # verify reads a HEIC too (no mark in it).
    report = _run("verify", "photos/IMG_0001.HEIC", cwd=tmp_path)
    assert report.returncode == cli.EXIT_NOT_MARKED, report.stdout
    assert "image 256x256" in report.stdout and "labels: none" in report.stdout


@pytest.mark.slow
def test_a_transparent_target_stays_transparent(images: Images, tmp_path: Path) -> None:
    """A cut-out portrait (transparent round it, a soft edge) swapped to PNG, WebP, AVIF
    and TIFF keeps its alpha and, marked, its watermark; to JPEG it is over white, as
    before. A TIFF target in a folder gives a TIFF output."""
    hopper = np.asarray(Image.open(images.target_png).convert("RGB"))
    h, w = hopper.shape[:2]
    yy, xx = np.mgrid[:h, :w]
    reach = np.hypot((xx - w / 2) / (0.45 * w), (yy - h / 2) / (0.5 * h))
    alpha = np.clip((1.1 - reach) * 255 / 0.2, 0, 255).astype(np.uint8)
    target = tmp_path / "cut_out.png"
    Image.fromarray(np.dstack([hopper, alpha]), mode="RGBA").save(target)
    for name in ("out.png", "out.webp", "out.avif", "out.jpg"):
        result = _run(
            "swap", "-s", images.source_png, "-t", target, "-o", name, cwd=tmp_path, marked=True
        )
        assert result.returncode == EXIT_OK, result.stderr
    (tmp_path / "tiffs").mkdir()
    Image.open(target).save(tmp_path / "tiffs" / "cut_out.tif")
    result = _run(
        "swap", "-s", images.source_png, "-t", "tiffs", "-o", "swapped", cwd=tmp_path, marked=True
    )
    assert result.returncode == EXIT_OK, result.stderr
    assert [p.name for p in (tmp_path / "swapped").iterdir()] == ["cut_out.tif"]
    for name in ("out.png", "out.webp", "out.avif", "swapped/cut_out.tif"):
        out = np.asarray(Image.open(tmp_path / name))
        assert out.shape == (h, w, 4), name
        alpha_error = np.abs(out[:, :, 3].astype(int) - alpha)
        assert alpha_error.max() <= (8 if name in ("out.webp", "out.avif") else 0), name
        report = _run("verify", name, cwd=tmp_path)
        assert report.returncode == EXIT_OK and "FOUND" in report.stdout, report.stdout
    # The face is swapped (over white, as a viewer shows it, the JPEG's picture).
    assert np.asarray(Image.open(tmp_path / "out.jpg")).shape == (h, w, 3)
    shown = read_image(tmp_path / "out.png").astype(int)
    assert np.abs(shown - read_image(tmp_path / "out.jpg").astype(int)).mean() < 3
    # (Within the two runs' different watermarks: each about 2.2 grey levels RMS, up to
    # twice that on texture, Grace Hopper's uniform and hair.)
    assert np.abs(shown - read_image(tmp_path / "swapped/cut_out.tif").astype(int)).mean() < 3
    assert np.abs(shown - read_image(target).astype(int)).mean() > 1
    # A target with no face, passed through, keeps its transparency too.
    blank = np.zeros((64, 64, 4), np.uint8)
    blank[16:48, 16:48] = (90, 120, 150, 255)
    Image.fromarray(blank, mode="RGBA").save(tmp_path / "blank.png")
    result = _run(
        "swap", "-s", images.source_png, "-t", "blank.png", "-o", "blank_out.png",
        "--skip-no-face", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "blank_out.png")), blank)


def test_swap_marks_output_by_default_and_verify_reports_it(images: Images, tmp_path: Path) -> None:
    marked = tmp_path / "marked.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", marked,
        cwd=tmp_path, marked=True,
    )  # fmt: skip
    assert result.returncode == EXIT_OK, result.stderr
    report = _run("verify", marked, cwd=tmp_path)
    assert report.returncode == 0, report.stdout + report.stderr
    assert "FOUND" in report.stdout and "synthetic, faceweave" in report.stdout
    assert "faceweave:synthetic=true" in report.stdout
    plain = tmp_path / "plain.png"
    result = _run(
        "swap", "-s", images.source_png, "-t", images.target_png, "-o", plain, cwd=tmp_path
    )
    assert result.returncode == EXIT_OK, result.stderr
    report = _run("verify", plain, cwd=tmp_path)
    assert report.returncode == 4 and "not found" in report.stdout
    missing = _run("verify", tmp_path / "nope.png", cwd=tmp_path)
    assert missing.returncode == EXIT_ERROR and "Traceback" not in missing.stderr


def test_a_map_entry_splits_where_its_files_are(tmp_path: Path) -> None:
    """SRC=REF with "=" in a file name: the split whose files exist (the first "=" had
    been taken, "a: no such file"); without one, the first; no "=" is a usage error."""
    (tmp_path / "a=b.png").write_bytes(b"x")
    (tmp_path / "ref.jpg").write_bytes(b"x")
    both = f"{tmp_path}/a=b.png={tmp_path}/ref.jpg"
    assert cli._mapping(both) == (tmp_path / "a=b.png", tmp_path / "ref.jpg")
    assert cli._mapping("x.png=y.png") == (Path("x.png"), Path("y.png"))
    for bad in ("x.png", "=y.png", "x.png="):
        with pytest.raises(argparse.ArgumentTypeError, match="expected SRC=REF"):
            cli._mapping(bad)


def test_analyse_lines_print_no_minus_zero(astronaut_face: Face) -> None:
    """A box just past the frame's edge had printed "(-0,-0)"."""
    import dataclasses

    face = dataclasses.replace(
        astronaut_face,
        bbox=(-0.3, -0.2, 100.4, 120.0),
        landmarks_5=np.full((5, 2), -0.04, np.float32),
    )
    line = cli._face_line(0, face)
    assert "-0" not in line and "box (0,0)-(100,120)" in line, line
    assert "(0.0,0.0)" in line
