"""The benchmarks' face set: a folder with or without a MANIFEST.tsv."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path


def _common() -> ModuleType:
    return benchmark_module("common")


def test_a_folder_without_a_manifest_gives_every_still_image(
    tmp_path: Path, astronaut: np.ndarray
) -> None:
    common = _common()
    cv2.imwrite(str(tmp_path / "b_face.jpg"), np.asarray(astronaut))
    cv2.imwrite(str(tmp_path / "a_face.png"), np.asarray(astronaut)[:, ::-1])
    (tmp_path / "notes.txt").write_text("not an image")
    (tmp_path / "clip.mp4").write_bytes(b"\x00" * 16)
    images = common.folder_images(tmp_path)
    assert [image.name for image, _ in images] == ["a_face", "b_face"]
    assert images[0][0].frame.shape == astronaut.shape
    assert images[0][1] != images[1][1]  # file hashes, for de-duplication


def test_a_manifest_lists_only_its_single_face_images(
    tmp_path: Path, astronaut: np.ndarray
) -> None:
    common = _common()
    for name in ("img_one.png", "img_group.png", "img_unlisted.png"):
        cv2.imwrite(str(tmp_path / name), np.asarray(astronaut))
    (tmp_path / "MANIFEST.tsv").write_text(
        "file\ttype\tcontent_note\n"
        "img_one.png\timage\t1 face, frontal\n"
        "img_group.png\timage\tgroup of 5\n"
    )
    images = common.folder_images(tmp_path)
    assert [image.name for image, _ in images] == ["one"]
    # The cut-faces benchmark's group photos: the other listed stills.
    assert [image.name for image in common.group_images(tmp_path)] == ["group"]
    (tmp_path / "MANIFEST.tsv").unlink()
    assert common.group_images(tmp_path) == []


def test_the_group_tone_benchmark_without_group_photos_measures_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ../shared there are no group photos: it says so and writes nothing."""
    group_tone = benchmark_module("group_tone")
    out = benchmark_module("common").OUT_ROOT / "test_group_tone"
    assert group_tone.main(["--faces", str(tmp_path), "--out", str(out)]) == 0
    assert "no group photos" in capsys.readouterr().out
    assert not out.exists()
