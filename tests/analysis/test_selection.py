"""Tests for faceweave.analysis.selection on a frame with two faces."""

from __future__ import annotations

import pytest

from faceweave.analysis.selection import ORDERS, SELECTORS, face_distance, order_faces, select_faces
from faceweave.errors import UsageError
from faceweave.types import Face


@pytest.fixture(scope="module")
def left_right(pair_faces: list[Face]) -> tuple[Face, Face]:
    """(astronaut, Grace Hopper) in the pair frame: the astronaut is left, smaller and higher."""
    assert len(pair_faces) == 2
    left, right = sorted(pair_faces, key=lambda f: f.bbox[0])
    assert left.size < right.size and left.bbox[1] < right.bbox[1]
    return left, right


@pytest.mark.parametrize(
    ("order", "first"),
    [
        ("large-small", "right"),
        ("small-large", "left"),
        ("left-right", "left"),
        ("right-left", "right"),
        ("top-bottom", "left"),
        ("bottom-top", "right"),
    ],
)
def test_order_faces(left_right: tuple[Face, Face], order: str, first: str) -> None:
    left, right = left_right
    expected = [left, right] if first == "left" else [right, left]
    for faces in ([left, right], [right, left]):
        assert order_faces(faces, order) == expected


def test_order_best_worst(left_right: tuple[Face, Face]) -> None:
    ordered = order_faces(list(left_right), "best-worst")
    assert ordered[0].score >= ordered[1].score
    assert order_faces(list(left_right), "worst-best") == ordered[::-1]


def test_orders_listed() -> None:
    faces: list[Face] = []
    for order in ORDERS:
        assert order_faces(faces, order) == []


def test_order_unknown() -> None:
    with pytest.raises(UsageError):
        order_faces([], "random")


def test_order_does_not_mutate(left_right: tuple[Face, Face]) -> None:
    faces = [left_right[1], left_right[0]]
    order_faces(faces, "left-right")
    assert faces == [left_right[1], left_right[0]]


def test_select_one_and_many(left_right: tuple[Face, Face]) -> None:
    left, right = left_right
    assert select_faces([left, right], "one") == [right]
    assert select_faces([left, right], "one", order="left-right") == [left]
    assert select_faces([left, right], "many") == [right, left]
    assert select_faces([left, right], "many", order="left-right") == [left, right]
    assert select_faces([], "one") == []


def test_select_reference(
    left_right: tuple[Face, Face], astronaut_face: Face, grace_hopper_face: Face
) -> None:
    left, right = left_right
    assert select_faces([left, right], "reference", reference=astronaut_face) == [left]
    assert select_faces([left, right], "reference", reference=right) == [right]
    # Fails while the analyser's embeddings are unstable (see test_analyser's
    # test_embedding_stable_for_same_pixels): the same Grace Hopper pixels are 0.72 apart.
    assert select_faces([left, right], "reference", reference=grace_hopper_face) == [right], (
        "ENGINE BUG (analyser embeddings): Grace Hopper is not matched to herself"
    )
    both = select_faces([left, right], "reference", reference=astronaut_face, max_distance=10.0)
    assert both == [left, right]  # nearest first
    assert (
        select_faces([left, right], "reference", reference=astronaut_face, max_distance=0.0) == []
    )


def test_face_distance(left_right: tuple[Face, Face], astronaut_face: Face) -> None:
    left, right = left_right
    assert face_distance(left, left) == 0.0
    assert face_distance(left, astronaut_face) < 0.3
    assert face_distance(right, astronaut_face) > 0.6
    assert face_distance(left, right) == pytest.approx(face_distance(right, left))


def test_select_reference_needs_reference(left_right: tuple[Face, Face]) -> None:
    with pytest.raises(UsageError):
        select_faces(list(left_right), "reference")


@pytest.mark.parametrize("selector", ["all", "", "ONE"])
def test_unknown_selector(left_right: tuple[Face, Face], selector: str) -> None:
    assert selector not in SELECTORS
    with pytest.raises(UsageError):
        select_faces(list(left_right), selector)
    with pytest.raises(ValueError):
        select_faces(list(left_right), selector)


@pytest.mark.parametrize("distance", [float("nan"), float("inf"), -0.1, "0.6"])
def test_a_reference_distance_that_is_no_distance(
    left_right: tuple[Face, Face], distance: object
) -> None:
    # (NaN had matched no face, without a word.)
    with pytest.raises(UsageError, match="max_distance must be a number of 0 or more"):
        select_faces(
            list(left_right),
            "reference",
            reference=left_right[0],
            max_distance=distance,  # type: ignore[arg-type]
        )
