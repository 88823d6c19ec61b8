"""The mirror benchmark: a photo and its mirror image swapped alike."""

from __future__ import annotations

import json

import numpy as np
import pytest
from benchmark_scripts import benchmark_module  # tests/benchmark_scripts.py: tests/ is on sys.path

import faceweave as fw


def test_patch_difference_counts_a_patch_not_the_edges_shifts() -> None:
    """A patch that differs between the two outputs reads as its difference; a
    one-pixel shift of a sharp edge reads as little (the mesh's own jitter)."""
    mirror = benchmark_module("mirror")
    frame = np.zeros((200, 200, 3), np.uint8)
    frame[:, 100:] = 200
    box = (20, 20, 180, 180)
    same, _ = mirror.patch_difference(frame, frame.copy(), box)
    assert same == 0.0
    shifted = np.roll(frame, 1, axis=1)
    edge, _ = mirror.patch_difference(frame, shifted, box)
    patched = frame.copy()
    patched[60:100, 30:70] = 120
    patch, _ = mirror.patch_difference(frame, patched, box)
    assert edge < 15.0 < 60.0 < patch, (edge, patch)


def test_the_package_photos_swap_alike_with_their_mirror_images(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Astronaut and Grace Hopper, each onto the other: the swap and the mirror
    images' swap mirrored back differ by the mesh's own fit only (12 and 23 grey
    levels at the 99th percentile); a swap that drew something on one side of the
    image, whichever way the photo faces, is told at once."""
    mirror = benchmark_module("mirror")
    out = benchmark_module("common").OUT_ROOT / "test_mirror"
    assert mirror.main(["--no-shared", "--out", str(out), "--sheet", "1"]) == 0
    report = json.loads((out / "mirror.json").read_text())
    summary = report["summary"]
    assert summary["n_images"] == 2 and summary["n_pairs"] == 2
    assert summary["pair_p99_max"] < 35.0, report["pairs"]
    assert all(t["mean"] < 15.0 for t in report["textures"]), report["textures"]
    assert (out / "mirror_worst.jpg").exists()

    swap = fw.Swapper.swap

    def one_sided(self: fw.Swapper, frame: np.ndarray, faces: object) -> np.ndarray:
        result = swap(self, frame, faces)
        result[:, : result.shape[1] // 2] //= 2  # the image's left half darkened
        return result

    monkeypatch.setattr(fw.Swapper, "swap", one_sided)
    assert mirror.main(["--no-shared", "--out", str(out), "--sheet", "0"]) == 0
    summary = json.loads((out / "mirror.json").read_text())["summary"]
    assert summary["pair_p99_max"] > 60.0, summary
