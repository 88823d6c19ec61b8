"""Eyeballs in iris coordinates: fit, patch, fill and paint, on drawn eyes."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest

from faceweave.core import eyeball
from faceweave.core.eyeball import UNIT_IRIS, eye_patch, iris_affine, paint_eye, plausible_iris

SKIN = (120.0, 150.0, 190.0)
WHITE = (225.0, 230.0, 235.0)
IRIS = (40.0, 70.0, 110.0)
CENTRE = (100.0, 60.0)
HALF_WIDTH = 40.0
RADIUS = 14.0


def _lids(half_height: float, centre: tuple[float, float] = CENTRE) -> np.ndarray:
    """(32, 2) an almond-shaped opening: upper arc left to right, lower arc back."""
    t = np.linspace(0.0, np.pi, 17)[:-1]
    x = centre[0] - HALF_WIDTH * np.cos(t)
    upper = np.stack([x, centre[1] - half_height * np.sin(t)], axis=1)
    t2 = np.linspace(np.pi, 2 * np.pi, 17)[:-1]
    x2 = centre[0] - HALF_WIDTH * np.cos(t2)
    lower = np.stack([x2, centre[1] - half_height * np.sin(t2)], axis=1)
    return np.concatenate([upper, lower]).astype(np.float32)


def _corners(centre: tuple[float, float] = CENTRE) -> np.ndarray:
    return np.array([[centre[0] - HALF_WIDTH, centre[1]], [centre[0] + HALF_WIDTH, centre[1]]])


def _iris_points(centre: tuple[float, float], radius: float = RADIUS) -> np.ndarray:
    return (np.asarray(centre) + radius * UNIT_IRIS).astype(np.float32)


def _draw_eye(
    half_height: float,
    iris_at: tuple[float, float],
    *,
    white: tuple[float, float, float] = WHITE,
    iris: tuple[float, float, float] = IRIS,
) -> np.ndarray:
    """A skin-coloured image with one eye: white, iris and pupil, cut by the lids."""
    image = np.full((120, 200, 3), SKIN, np.float32)
    eye = np.full_like(image, white)
    cv2.circle(
        eye,
        (int(iris_at[0] * 16), int(iris_at[1] * 16)),
        int(RADIUS * 16),
        iris,
        -1,
        cv2.LINE_AA,
        shift=4,
    )
    cv2.circle(
        eye,
        (int(iris_at[0] * 16), int(iris_at[1] * 16)),
        int(5 * 16),
        (10, 10, 10),
        -1,
        cv2.LINE_AA,
        shift=4,
    )
    opening = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(
        opening, [np.round(_lids(half_height) * 16).astype(np.int32)], 255, cv2.LINE_AA, shift=4
    )
    a = (opening.astype(np.float32) / 255.0)[..., None]
    return np.clip(a * eye + (1 - a) * image, 0, 255).astype(np.uint8)


def _patch_at(patch: np.ndarray, u: float, v: float) -> np.ndarray:
    """The patch's pixel at iris coordinates (u, v)."""
    pw, ph = eyeball.patch_size()
    x = int(round((pw - 1) / 2 + u * eyeball.PATCH_RES))
    y = int(round((ph - 1) / 2 + v * eyeball.PATCH_RES))
    return patch[y, x]


class TestIrisFit:
    def test_recovers_an_affine_map(self) -> None:
        rng = np.random.default_rng(3)
        true = np.hstack([rng.normal(0, 5, (2, 2)), rng.normal(50, 10, (2, 1))])
        points = UNIT_IRIS @ true[:, :2].T + true[:, 2]
        assert np.allclose(iris_affine(points), true, atol=1e-9)

    def test_least_squares_over_a_noisy_contour(self) -> None:
        points = _iris_points((60.0, 40.0), 10.0)
        points[1:] += np.array([[0.5, 0], [0, -0.5], [-0.5, 0], [0, 0.5]], np.float32)
        fit = iris_affine(points)
        assert np.allclose(fit[:, 2], (60.0, 40.0), atol=1e-5)  # the mean of the points
        assert math.isclose(fit[0, 0], 10.5, abs_tol=1e-5)

    @pytest.mark.parametrize(
        ("radius", "aspect", "expected"),
        [
            (16.0, 1.0, True),
            (16.0, 2.0, True),
            (3.0, 1.0, False),
            (40.0, 1.0, False),
            (16.0, 3.0, False),
            (0.0, 1.0, False),
        ],
    )
    def test_plausible(self, radius: float, aspect: float, expected: bool) -> None:
        affine = np.array([[radius / math.sqrt(aspect), 0, 0], [0, radius * math.sqrt(aspect), 0]])
        assert plausible_iris(affine, 80.0) is expected
        assert plausible_iris(affine, 0.0) is False


class TestEyePatch:
    def test_white_size_and_gaze_of_the_photo(self) -> None:
        at = (CENTRE[0] + 8.0, CENTRE[1])
        image = _draw_eye(18.0, at)
        patch = eye_patch(image, _lids(18.0), _iris_points(at), _corners())
        assert patch is not None
        assert np.allclose(patch.white, WHITE, atol=6)
        assert math.isclose(patch.size, RADIUS / (2 * HALF_WIDTH), rel_tol=0.02)
        # The lid ring's centroid sits at CENTRE: the iris 8 px (a tenth of the eye) right.
        assert np.allclose(patch.gaze, (8.0 / 80.0, 0.0), atol=0.01)
        # Iris coordinates: the pupil at the centre, the iris one radius out, white beyond.
        assert _patch_at(patch.pixels, 0, 0).max() < 30
        assert np.allclose(_patch_at(patch.pixels, 0.7, 0), IRIS, atol=8)
        assert np.allclose(_patch_at(patch.pixels, 1.8, 0), WHITE, atol=8)

    def test_the_part_of_the_iris_the_lids_hid_is_filled_in(self) -> None:
        image = _draw_eye(9.0, CENTRE)  # lids cut the iris's top and bottom (radius 14)
        patch = eye_patch(image, _lids(9.0), _iris_points(CENTRE), _corners())
        assert patch is not None
        for v in (-0.85, 0.85):  # under the lids in the photo: skin there
            assert np.allclose(_patch_at(patch.pixels, 0, v), IRIS, atol=20)
            assert _patch_at(patch.alpha, 0, v) == pytest.approx(1.0)
        # Beyond the iris, where the lids hid the white: left to the target (alpha 0).
        assert _patch_at(patch.alpha, 1.6, -1.0) == pytest.approx(0.0)
        assert _patch_at(patch.alpha, 1.8, 0.0) == pytest.approx(1.0)

    def test_no_patch_where_no_eye_shows(self) -> None:
        lids = _lids(18.0)
        iris = _iris_points(CENTRE)
        flat = _draw_eye(18.0, CENTRE, white=SKIN, iris=SKIN)  # painted over: no contrast
        assert eye_patch(flat, lids, iris, _corners()) is None
        slit = _draw_eye(2.0, CENTRE)  # a squint: hardly any iris or white
        assert eye_patch(slit, _lids(2.0), iris, _corners()) is None

    def test_mirrored(self) -> None:
        image = _draw_eye(18.0, (CENTRE[0] + 8.0, CENTRE[1]))
        patch = eye_patch(image, _lids(18.0), _iris_points((108.0, 60.0)), _corners())
        assert patch is not None
        flipped = patch.mirrored()
        assert np.array_equal(flipped.pixels, patch.pixels[:, ::-1])
        assert np.array_equal(flipped.mirrored().pixels, patch.pixels)
        assert np.array_equal(flipped.gaze, patch.gaze)  # both eyes look the same way


def _dark_centroid(image: np.ndarray, lids: np.ndarray) -> np.ndarray:
    """Centroid of the opening's darkest pixels (the iris and pupil)."""
    inside = np.zeros(image.shape[:2], np.uint8)
    cv2.fillPoly(inside, [np.round(lids).astype(np.int32)], 255)
    luma = cv2.cvtColor(np.clip(image, 0, 255).astype(np.uint8), cv2.COLOR_BGR2GRAY)
    dark = (inside > 0) & (luma < 120)
    ys, xs = np.nonzero(dark)
    return np.array([xs.mean(), ys.mean()])


@pytest.fixture
def source_patch() -> eyeball.EyePatch:
    """A photo's eye looking straight ahead."""
    image = _draw_eye(18.0, CENTRE)
    patch = eye_patch(image, _lids(18.0), _iris_points(CENTRE), _corners())
    assert patch is not None
    return patch


class TestPaintEye:
    def test_the_iris_goes_where_the_target_looks(self, source_patch: eyeball.EyePatch) -> None:
        at = (CENTRE[0] - 12.0, CENTRE[1] + 2.0)
        target = _draw_eye(18.0, at, iris=(150, 150, 150)).astype(np.float32)
        canvas = np.full_like(target, 128.0)
        assert paint_eye(canvas, source_patch, _lids(18.0), _iris_points(at), _corners(), target)
        assert np.allclose(_dark_centroid(canvas, _lids(18.0)), at, atol=1.0)

    def test_gaze_source_keeps_the_photos_gaze(self, source_patch: eyeball.EyePatch) -> None:
        at = (CENTRE[0] - 12.0, CENTRE[1])
        target = _draw_eye(18.0, at).astype(np.float32)
        canvas = target.copy()
        lids = _lids(18.0)
        paint_eye(canvas, source_patch, lids, _iris_points(at), _corners(), target, gaze="source")
        # The photo's iris sat at the opening's centre; the target's own iris (where the
        # painted one is not) is covered by the source's white in shade, not shown twice.
        assert np.allclose(_dark_centroid(canvas, lids), CENTRE, atol=1.0)
        own = canvas[int(at[1]), int(at[0]) - 8]
        assert own.min() > 150

    def test_only_the_opening_changes(self, source_patch: eyeball.EyePatch) -> None:
        target = _draw_eye(18.0, CENTRE).astype(np.float32)
        canvas = np.full_like(target, 77.0)
        paint_eye(canvas, source_patch, _lids(18.0), _iris_points(CENTRE), _corners(), target)
        grown = np.zeros(canvas.shape[:2], np.uint8)
        cv2.fillPoly(grown, [np.round(_lids(18.0)).astype(np.int32)], 255)
        grown = cv2.dilate(grown, np.ones((5, 5), np.uint8))
        assert np.all(canvas[grown == 0] == 77.0)
        assert np.abs(canvas[grown > 0] - 77.0).max() > 100

    def test_the_white_the_photo_hid_keeps_the_targets_lid_shadow(self) -> None:
        # The photo's eye is narrow; the target's is wide open, its white shaded
        # towards the upper lid (a stripe at 60% of its light).
        image = _draw_eye(10.0, CENTRE, white=(200.0, 210.0, 220.0))
        narrow = eye_patch(image, _lids(10.0), _iris_points(CENTRE), _corners())
        assert narrow is not None
        target = _draw_eye(24.0, CENTRE).astype(np.float32)
        shade = (slice(40, 44), slice(85, 95))  # under the upper lid, clear of the iris
        target[shade] *= 0.6
        canvas = target.copy()
        paint_eye(canvas, narrow, _lids(24.0), _iris_points(CENTRE), _corners(), target)
        # Beside the iris: the photo's own white, balanced to the target's.
        lit = canvas[int(CENTRE[1]) - 3, 72]
        assert np.allclose(lit, WHITE, atol=8)
        # Above it, hidden by the photo's lids: the target's white with its shadow.
        shaded = canvas[shade].reshape(-1, 3).mean(0)
        assert np.allclose(shaded / np.array(WHITE), 0.6, atol=0.06)

    def test_a_hidden_opening_or_an_implausible_iris_paints_nothing(
        self, source_patch: eyeball.EyePatch
    ) -> None:
        target = _draw_eye(18.0, CENTRE).astype(np.float32)
        canvas = np.full_like(target, 50.0)
        hidden = np.zeros((12, 20), np.uint8)  # a coarse grid over the canvas
        paint_eye(
            canvas, source_patch, _lids(18.0), _iris_points(CENTRE), _corners(), target, hidden
        )
        assert np.all(canvas == 50.0)
        collapsed = np.repeat(np.array([CENTRE], np.float32), 5, axis=0)
        assert not paint_eye(canvas, source_patch, _lids(18.0), collapsed, _corners(), target)
        assert np.all(canvas == 50.0)

    def test_the_iris_keeps_the_photos_size_against_the_eye(
        self, source_patch: eyeball.EyePatch
    ) -> None:
        # The target's fitted iris is 10% larger than the photo's proportion: the
        # photo's proportion wins (within IRIS_MAX_SCALE).
        target = _draw_eye(18.0, CENTRE).astype(np.float32)
        canvas = target.copy()
        paint_eye(
            canvas,
            source_patch,
            _lids(18.0),
            _iris_points(CENTRE, RADIUS * 1.1),
            _corners(),
            target,
        )
        row = cv2.cvtColor(np.clip(canvas, 0, 255).astype(np.uint8), cv2.COLOR_BGR2GRAY)[60]
        dark = np.nonzero(row < 150)[0]
        dark = dark[(dark > 60) & (dark < 140)]
        assert dark.max() - dark.min() + 1 == pytest.approx(2 * RADIUS, abs=2)


def test_the_eye_is_white_balanced_to_the_target() -> None:
    """A photo under a warm, dim light: its iris keeps its own colour against its white,
    brought to the target's white (not shifted by a skin colour map)."""
    dim_white = (155.0, 165.0, 180.0)  # within WHITE_TINT_RANGE of WHITE's tint
    dim_iris = (20.0, 45.0, 90.0)
    image = _draw_eye(18.0, CENTRE, white=dim_white, iris=dim_iris)
    patch = eye_patch(image, _lids(18.0), _iris_points(CENTRE), _corners())
    assert patch is not None
    target = _draw_eye(18.0, CENTRE).astype(np.float32)
    canvas = np.full_like(target, 128.0)
    paint_eye(canvas, patch, _lids(18.0), _iris_points(CENTRE), _corners(), target)
    gain = np.array(WHITE) / np.array(dim_white)
    iris = canvas[int(CENTRE[1]), int(CENTRE[0] + 0.7 * RADIUS)]
    assert np.allclose(iris, np.array(dim_iris) * gain, atol=6)
    assert np.allclose(canvas[int(CENTRE[1]), int(CENTRE[0] + 1.8 * RADIUS)], WHITE, atol=6)


@pytest.mark.parametrize(
    ("source", "target", "level", "tint"),
    [
        ((200, 200, 200), (100, 100, 100), 0.5, (1, 1, 1)),
        ((10, 10, 10), (250, 250, 250), 2.5, (1, 1, 1)),
        ((200, 200, 200), (100, 200, 300), 1.0, (1 / 1.1, 1, 1.1)),
    ],
)
def test_white_gain_bounds(
    source: tuple[float, ...], target: tuple[float, ...], level: float, tint: tuple[float, ...]
) -> None:
    gain = eyeball.white_gain(np.array(source, float), np.array(target, float))
    assert np.allclose(gain, level * np.array(tint), rtol=1e-5)


def test_a_narrowed_eyes_dark_white_is_read_against_its_lids(
    source_patch: eyeball.EyePatch,
) -> None:
    """A narrowed target eye shows lashes and shadow where its white is measured (a
    third of the skin's light here): the source's eyeball had been darkened to match,
    a grey almond with no white. It is now balanced to at least WHITE_MIN_OF_LIDS of
    the lids' skin."""
    dark = tuple(0.35 * v for v in SKIN)
    target = _draw_eye(18.0, CENTRE, white=dark, iris=(20.0, 20.0, 20.0)).astype(np.float32)
    canvas = target.copy()
    paint_eye(canvas, source_patch, _lids(18.0), _iris_points(CENTRE), _corners(), target)
    luma = np.array([0.114, 0.587, 0.299])
    beside = canvas[int(CENTRE[1]) - 3, 72]  # the painted white beside the iris
    floor = eyeball.WHITE_MIN_OF_LIDS * float(luma @ np.array(SKIN))
    assert float(luma @ beside) == pytest.approx(floor, rel=0.08)
    # A target white lighter than that is taken as it is.
    lit = _draw_eye(18.0, CENTRE, white=(200.0, 205.0, 210.0)).astype(np.float32)
    canvas = lit.copy()
    paint_eye(canvas, source_patch, _lids(18.0), _iris_points(CENTRE), _corners(), lit)
    assert np.allclose(canvas[int(CENTRE[1]) - 3, 72], (200.0, 205.0, 210.0), atol=8)


def test_no_colour_on_a_black_and_white_target_and_none_matched_on_request() -> None:
    image = _draw_eye(18.0, CENTRE)  # a brown-orange iris
    patch = eye_patch(image, _lids(18.0), _iris_points(CENTRE), _corners())
    assert patch is not None
    grey_target = _draw_eye(18.0, CENTRE, white=(200, 200, 200), iris=(90, 90, 90))
    target = grey_target.astype(np.float32)
    at = (int(CENTRE[1]), int(CENTRE[0] + 0.7 * RADIUS))
    canvas = target.copy()
    paint_eye(canvas, patch, _lids(18.0), _iris_points(CENTRE), _corners(), target, colour=0.0)
    assert np.ptp(canvas[at]) < 1.0  # grey: B = G = R
    raw = target.copy()
    paint_eye(canvas, patch, _lids(18.0), _iris_points(CENTRE), _corners(), target)
    paint_eye(raw, patch, _lids(18.0), _iris_points(CENTRE), _corners(), target, space="source")
    assert np.allclose(raw[at], IRIS, atol=6)  # the photo's own colour


def test_no_patch_from_a_tiny_eye() -> None:
    small = cv2.resize(_draw_eye(18.0, CENTRE), None, fx=0.2, fy=0.2, interpolation=cv2.INTER_AREA)
    scale = np.float32(0.2)
    lids, iris = _lids(18.0) * scale, _iris_points(CENTRE) * scale  # iris radius 2.8 px
    assert eye_patch(small, lids, iris, _corners() * scale) is None


def test_a_glint_in_a_dark_white_is_no_white() -> None:
    """Behind a lens, a "white" as dark as the iris but for a bright glint (a rimless
    lens's edge) passes the lighter-part contrast test; most of it is not lighter than
    the iris, so the photo gives no patch. The same eye with its white showing does."""
    lids, iris = _lids(18.0), _iris_points(CENTRE)
    dark = _draw_eye(18.0, CENTRE, white=(30.0, 50.0, 80.0))  # as dark as iris and pupil
    cv2.line(dark, (int(CENTRE[0] + 24), 30), (int(CENTRE[0] + 24), 90), (235, 235, 235), 3)
    pw, ph = eyeball.patch_size()
    patch = cv2.warpAffine(
        dark.astype(np.float32),
        eyeball.patch_to_image(iris_affine(iris)),
        (pw, ph),
        flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
    )
    lit = (patch @ eyeball.LUMA_BGR) > float(np.asarray(IRIS) @ eyeball.LUMA_BGR) + 100
    assert lit.any()  # the glint lies in the patch, where the white is read
    assert eye_patch(dark, lids, iris, _corners()) is None
    assert eye_patch(_draw_eye(18.0, CENTRE), lids, iris, _corners()) is not None


def test_any_placement_paints_finite_values_or_nothing(source_patch: eyeball.EyePatch) -> None:
    """Openings cut by the canvas's edge, tiny or huge, irises off the eye, hidden parts:
    never an error or a NaN, and a refusal changes nothing."""
    rng = np.random.default_rng(1)
    painted = 0
    for _ in range(300):
        h, w = (int(v) for v in rng.integers(5, 80, 2))
        canvas = rng.uniform(0, 255, (h, w, 3)).astype(np.float32)
        backdrop = rng.uniform(0, 255, (h, w, 3)).astype(np.float32)
        at, scale = rng.uniform(-20, 100, 2), rng.uniform(0.05, 1.5)
        lids = (_lids(rng.uniform(1, 25)) - np.array(CENTRE)) * scale + at
        iris = _iris_points((0.0, 0.0), RADIUS * rng.uniform(0.3, 1.5)) * scale + at
        iris += rng.normal(0, 3, (5, 2)).astype(np.float32)
        corners = (_corners() - np.array(CENTRE)) * scale + at
        hidden = None if rng.random() < 0.5 else (rng.random((8, 9)) * 255).astype(np.uint8)
        before = canvas.copy()
        ok = paint_eye(
            canvas,
            source_patch,
            lids.astype(np.float32),
            iris,
            corners,
            backdrop,
            hidden,
            gaze=str(rng.choice(["target", "source"])),
            colour=float(rng.random()),
        )
        assert np.isfinite(canvas).all()
        if not ok:
            assert np.array_equal(canvas, before)
        painted += ok
    assert painted > 30  # the draw covers plausible placements too


def test_a_white_as_colourful_as_the_skin_is_not_balanced_on() -> None:
    """Behind a warm lens (or in a squint read as open) the "white" is skin-coloured:
    the patch is kept, for the skin's colour map, but not white-balanced; drawn in the
    photo's colours, the target's white around it is brought to the photo's."""
    warm = (60.0, 120.0, 200.0)
    image = _draw_eye(18.0, CENTRE, white=warm)
    patch = eye_patch(image, _lids(9.0), _iris_points(CENTRE), _corners())
    assert patch is not None and not patch.balanced
    clear = eye_patch(_draw_eye(18.0, CENTRE), _lids(9.0), _iris_points(CENTRE), _corners())
    assert clear is not None and clear.balanced
    target = _draw_eye(24.0, CENTRE).astype(np.float32)
    canvas = target.copy()
    paint_eye(canvas, patch, _lids(24.0), _iris_points(CENTRE), _corners(), target, space="source")
    hidden_white = canvas[40:44, 85:95].reshape(-1, 3).mean(0)  # under the photo's lids
    assert np.allclose(hidden_white, patch.white, atol=10)


class TestClosingLids:
    """A nearly closed opening (a blink, a wink: the mesh never quite closes the lids)
    shows the target's own lids, not an iris in the slit."""

    # The almond's half-height for a lids' gap of ``gap`` eye widths.
    @staticmethod
    def _half(gap: float) -> float:
        return gap * HALF_WIDTH

    def test_open_share_of_open_narrow_and_closed_eyes(self) -> None:
        low, high = eyeball.CLOSED_GAP
        assert eyeball.open_share(_lids(18.0), _corners()) == 1.0
        assert eyeball.open_share(_lids(self._half(low / 2)), _corners()) == 0.0
        middle = self._half((low + high) / 2)
        assert eyeball.open_share(_lids(middle), _corners()) == pytest.approx(0.5, abs=0.02)
        # The eye's own axes, not the image's: a tilted head's eye reads the same.
        turn = cv2.getRotationMatrix2D(CENTRE, 30.0, 1.0)
        tilted = cv2.transform(_lids(middle)[None], turn)[0]
        corners = cv2.transform(_corners()[None].astype(np.float32), turn)[0]
        assert eyeball.open_share(tilted, corners) == pytest.approx(0.5, abs=0.02)

    def test_lids_that_meet_in_an_arc_read_as_closed(self) -> None:
        # A blink's lids meet along a curve: the ring's whole extent across the eye
        # (the arc's sag, a fifth of the eye's width) is no gap between the lids.
        x = np.linspace(-HALF_WIDTH, HALF_WIDTH, 17)
        sag = 0.2 * 2 * HALF_WIDTH * (1.0 - (x / HALF_WIDTH) ** 2)
        gap = 0.02 * 2 * HALF_WIDTH * (1.0 - (x / HALF_WIDTH) ** 2)
        upper = np.stack([CENTRE[0] + x, CENTRE[1] - sag], axis=1)
        lower = np.stack([CENTRE[0] + x, CENTRE[1] - sag + gap], axis=1)[::-1][1:-1]
        ring = np.concatenate([upper, lower]).astype(np.float32)
        assert eyeball.lid_gap(ring, _corners()) == pytest.approx(0.02, abs=0.002)
        assert eyeball.open_share(ring, _corners()) == 0.0
        # An almond's gap is its height.
        assert eyeball.lid_gap(_lids(18.0), _corners()) == pytest.approx(36.0 / (2 * HALF_WIDTH))

    def test_closed_lids_paint_nothing_and_narrow_ones_fade_the_eye(
        self, source_patch: eyeball.EyePatch, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        low, high = eyeball.CLOSED_GAP
        target = _draw_eye(18.0, CENTRE).astype(np.float32)
        closed = _lids(self._half(low / 2))
        canvas = np.full_like(target, 77.0)
        assert not paint_eye(canvas, source_patch, closed, _iris_points(CENTRE), _corners(), target)
        assert np.all(canvas == 77.0)
        assert (
            eyeball.eye_detail(
                source_patch, closed, _iris_points(CENTRE), _corners(), (120, 200), 1.0
            )
            is None
        )
        # Halfway up the ramp, half of the change that a fully shown eye makes.
        narrow = _lids(self._half((low + high) / 2))
        changes = []
        for gap in (eyeball.CLOSED_GAP, (0.0, 1e-6)):
            monkeypatch.setattr(eyeball, "CLOSED_GAP", gap)
            canvas = np.full_like(target, 77.0)
            assert paint_eye(canvas, source_patch, narrow, _iris_points(CENTRE), _corners(), target)
            changes.append(canvas - 77.0)
        tolerance = 0.05 * np.abs(changes[1]).max()
        np.testing.assert_allclose(changes[0], 0.5 * changes[1], atol=tolerance)


class TestEyeDetail:
    def test_the_photos_fine_detail_goes_where_the_eye_is_drawn(
        self, source_patch: eyeball.EyePatch
    ) -> None:
        at = (CENTRE[0] - 12.0, CENTRE[1] + 2.0)
        lids = _lids(18.0)
        drawn = eyeball.eye_detail(
            source_patch, lids, _iris_points(at), _corners(), (120, 200), 1.0
        )
        assert drawn is not None
        (rows, cols), detail = drawn
        canvas = np.zeros((120, 200), np.float32)
        canvas[rows, cols] = detail
        # The iris's and the pupil's edges, where the eye is painted: their circles
        # around the iris's new place, nothing outside the opening.
        outside = np.zeros(canvas.shape, np.uint8)
        cv2.fillPoly(outside, [np.round(lids).astype(np.int32)], 255)
        outside = cv2.dilate(outside, np.ones((5, 5), np.uint8)) == 0
        assert np.abs(canvas[outside]).max() == 0.0
        ys, xs = np.nonzero(np.abs(canvas) > 5.0)
        radii = np.hypot(xs - at[0], ys - at[1])
        assert len(radii) > 20
        # On the iris's edge or in it: not the photo's own lids (18 px above and below).
        assert np.all(radii < RADIUS + 2.5)
        assert np.median(radii) == pytest.approx(RADIUS, abs=3.0)
        # A finer cut leaves less of it.
        finer = eyeball.eye_detail(
            source_patch, lids, _iris_points(at), _corners(), (120, 200), 0.4
        )
        assert finer is not None and np.abs(finer[1]).sum() < 0.7 * np.abs(detail).sum()

    def test_nothing_for_an_implausible_iris(self, source_patch: eyeball.EyePatch) -> None:
        flat = _iris_points(CENTRE) * np.array([1.0, 0.0]) + np.array([0.0, CENTRE[1]])
        assert (
            eyeball.eye_detail(source_patch, _lids(18.0), flat, _corners(), (120, 200), 1.0) is None
        )
