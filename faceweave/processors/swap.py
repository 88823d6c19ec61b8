"""Face swap and fusion in a pose-normalised face space.

How one face is swapped (all vectorised, no loop over triangles or pixels):

1. The **source** is prepared once (:class:`SourceModel`): its texture is
   unwrapped into a fixed UV layout (cylindrical unwrap of the canonical face);
   texels whose triangles face away from the camera, hide behind the nose or
   were seen at a grazing angle get the mirrored texel instead (no smears at
   profiles); hair and other non-skin outliers over the face are marked so the
   target shows there; glasses frames are painted out with the skin around them;
   the source's light (9 spherical-harmonics coefficients per channel, fitted on
   skin) is divided out to leave an albedo; its identity shape is kept in
   pose-normalised space.
2. The **output geometry** is the target's mesh, with the source's identity
   shape (eye spacing, nose, brows; not its expression) blended in by
   ``shape * fusion``, posed with the target's rotation, scale and position; the
   face oval and a turned head's silhouette stay the target's.
3. The output mesh is rasterised on a coarse grid; per pixel it yields UV
   coordinates, the matching target position and (``sh`` mode) the target's
   shading, bilinearly upsampled to the processing size (large faces are
   processed at ``process_size`` and composited back at full resolution).
4. The source texture is colour-matched on skin (``lct`` by default; ``sh``
   relights the albedo with the target's light), its eyeballs are drawn in the
   target's lids at the target's gaze and white-balanced to the target's whites
   (:mod:`faceweave.core.eyeball`), its finest detail toned down
   to the target's when the source is crisper (``detail``), mixed with the
   re-warped target by ``fusion``, and blended into the frame with a mask
   feathered in face space. The mouth interior (and the eyes, if asked) keeps the
   target's pixels, and so do non-skin target pixels near the face's edge
   (background past a turned head, hair) and the target's glasses frames.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.hands import Hand, HandFinder, MediaPipeHands, face_crop
from faceweave.analysis.occluder import Occluder, Occlusion, lay_back, occlusion_of
from faceweave.core import blend as blend_ops
from faceweave.core import color as color_ops
from faceweave.core import creases, eyeball, lighting
from faceweave.core.brows import BrowLift, brow_lifts
from faceweave.core.facemodel import (
    HOLE_EYE_LEFT,
    HOLE_EYE_RIGHT,
    HOLE_MOUTH,
    HOLE_NONE,
    N_MESH,
    FaceModel,
    load_face_model,
)
from faceweave.core.geometry import from_pose_space, to_pose_space, vertex_normals
from faceweave.core.hands import HAND_POINTS, hands_area, keep_hands
from faceweave.core.raster import Raster, rasterize
from faceweave.core.shape import IdentityShape
from faceweave.errors import InputError, NoFaceError, UnknownOptionError, UsageError
from faceweave.types import Face, Frame, check_frame, is_real_number, is_whole_number

logger = logging.getLogger("faceweave")
# A source photo's advice (see _advice): a server leaves it to its jobs' notes.
advice_logger = logging.getLogger("faceweave.advice")

COLOR_MODES = ("none", "rct", "lct", "sh")
GAZE_MODES = ("target", "source")
# The target re-warped to the output mesh takes over from the target itself as the
# fusion's mix (fusion_mix) grows from 0 to this (see Swapper._swap_into).
FUSION_REWARP = 0.25
# A still target's brows take this share of the source's brows' offset (see
# Swapper._output_geometry): measured against the frame, it holds their expression.
STILL_BROW_SHAPE = 0.6
# The largest uv_size, work_size and process_size (a 2048 texture's float planes take
# 16 MiB each; more would only cost memory and time).
MAX_WORK_SIDE = 2048
# Easing of the fusion slider (see fusion_mix); 0 is linear, at most 2 (still monotonic).
FUSION_EASE = 0.8
# A fusion's mix of two faces' fine detail is raised back to the level between
# theirs (see _keep_fused_detail): its level measured over a Gaussian of this many
# pixels (sigma, at each band's own size), and raised by at most this factor.
FUSION_DETAIL_REACH = 3.0
FUSION_DETAIL_GAIN = 2.0
BLEND_MODES = ("alpha", "multiband", "poisson")
# Faces processed at under 1/DETAIL_RESTORE_SCALE of their size keep the target's own
# full-resolution detail where the output shows the target (see _swap_into's end); closer
# to the processing size the upsampling loses under a pixel of it (at fusion 1; a fusion
# between 0 and 1 keeps it on every face processed below its size).
DETAIL_RESTORE_SCALE = 1.5
# How a face processed below its size is upsampled for the composite. Bicubic looked
# crisper at 1.2-1.5x (vid_p03's eyes and nose), but the output then changed more from
# frame to frame: flicker +4% on each of the five development clips (vid_p03, nearly
# still, 0.99 -> 1.03).
COMPOSITE_UPSAMPLING = cv2.INTER_LINEAR
# The colour match raises the face's contrast by at most 1.25x and lowers it by at most
# 1.5x. A target's skin spread is mostly its light (carried by the light match), and
# matching it in full blew a source's brows, lashes and make-up up to black on hard-lit
# or stubbled targets (luma gains up to 2.7 between the dev photos). Lowering is freer:
# a source kept crisper than a soft target looks pasted and, as it moves, changes more
# from frame to frame than the clip does (flicker on vid_p02 0.94 -> 1.04 at 1/1.25).
COLOR_GAIN_RANGE = (1 / 1.5, 1.25)
# The linear colour match (lct) matches covariances with this share of the mean variance
# added to both: a source's skin varies little across its colour line, and matching that
# exactly amplified the source's minor colour directions up to 3.7x, into blue and orange
# blotches on a strongly tanned target. On the development set it also raised identity
# retrieval (0.771 -> 0.781) and lowered the landmark error (0.107 -> 0.105).
COLOR_RIDGE = 0.1
# The colour match keeps black near black (color_transfer's anchor_black): its offset is
# faded out below the source skin's mean lightness, by half at black. Without it black
# took the offset's cast: for a dark-skinned source (p21) on a pale target (p23) it moved
# to (19, 18, 0) BGR in his pupils and lashes. On the 306 development pairs without
# p15, p18 and p19 it moved d(out, src) 0.506 -> 0.501 and retrieval 280 -> 283, the
# landmark error unchanged (0.054).
COLOR_ANCHOR_BLACK = True

# Glasses detection (see _glasses_frames).
GLASSES_MIN_FACE_PX = 80.0  # smaller faces: too few pixels to tell a frame from a brow
# Grey levels of a thin dark (or bright) line over its surround: to count as a frame
# crossing the bridge (strict: skin texture, wrinkles and the nose's sides stay under
# it), and to be kept as part of a frame once the face wears glasses.
GLASSES_BRIDGE_CONTRAST = 35.0
GLASSES_LINE_CONTRAST = 18.0
# A source's frames are painted out of its texture: only strong lines, so that its own
# wrinkles and lashes around the eyes stay.
GLASSES_SOURCE_CONTRAST = 35.0
# How far from the eye openings (in eye widths) frame lines are looked for: on targets,
# and, further, on a source whose frames are painted out (the lower outer corner of a
# large frame and the temple arm behind it lie past the targets' reach: p29's left a
# dark curve at every target's temple).
GLASSES_REACH = 0.75
GLASSES_SOURCE_REACH = 0.95
# A painted-out frame takes with it, at the temples (past the eyes' outer corners, not
# near the eye openings), the texels under FRAME_DARK of the cheeks' median
# brightness that join its lines, and what they enclose when that is under
# FRAME_HOLE_MAX of the texture (see _with_dark_blocks).
FRAME_DARK = 0.5
FRAME_HOLE_MAX = 0.002
GLASSES_PAINTED_RESIDUE = 0.25  # share of strong lines left after painting: else keep
# Frames left in a source's texture are not occluders (the target does not show through
# them) on their texels, feathered by a Gaussian of this share of the texture's side.
GLASSES_FRAMES_FEATHER = 0.008
# The residue check's lines are measured on an 8-bit scale whose white is this many
# times the texture's 99.5th percentile.
GLASSES_SCALE_TOP = 1.5
# The glasses band left to a target that wears glasses when the source's own stay in its
# texture (SourceModel.glasses) is feathered by this share of the texture's side.
GLASSES_BAND_FEATHER = 0.015
# A source whose glasses stay in its texture: the band where they sit is left to the
# target from this head turn on (degrees of yaw: none .. all; p18 at 30 degrees wears
# them well, p15 at 55 shows a rim as a streak along its cheek), see Swapper._swap_into.
KEPT_GLASSES_YAW = (35.0, 50.0)
GLASSES_BRIDGE_CROSSED = (0.25, 0.40)  # bridge columns crossed by one line: none .. glasses
# An open eye shows white and iris: the lightness in its opening (OpenCV's 8-bit L*,
# 5th to 95th percentile, both eyes averaged) spans over 100 levels in a good photo and
# down to 47 for narrow eyes in a dim video frame; a closed lid, a squint or a tinted
# lens spans under 45 (a blink 44, the dev stills 19-36). eyes_seen ramps between the
# two values; a source counts as showing its eyes from the middle (45) up.
EYES_SEEN_RANGE = (38.0, 52.0)
EYES_MIN_FACE_PX = 40.0  # smaller faces: too few pixels to tell, taken as seen
# Where a source's eyes are not seen, the target's are kept out to this many eye widths
# from the opening (swollen or closed lids, the tinted part of a lens).
EYES_HIDDEN_RING = 0.35
# A still target whose eyes its photo shows shut (a closed or downcast lid, a squeezed
# smile: eyes_seen's span, p18, p24) while the mesh reads them open had the source's
# open eyes painted in: the output's lids close over them by 1 - eyes_seen, meeting
# this share of the way up from the lower lid (a closed eye's lash line sits low).
LID_MEET = 0.3
# The skin above the upper lid (the mesh's next ring: the crease) follows the lid down
# by this share of its way: a shut lid unfolds. Alone, the lid's edge (the lashes) was
# stretched into a grey band over a wide opening.
LID_CREASE_FOLLOW = 0.8
# Past this yaw (degrees) the nose may hide part of the far eye's opening: the source's
# eyeball is then painted only where the output mesh shows that opening.
EYES_HIDDEN_YAW = 20.0
# A target the mesh reads as turned past PROFILE_SHAPE_YAW[0] degrees takes less of the
# source's identity shape, none past PROFILE_SHAPE_YAW[1] (linear between): the mesh
# reads a profile as turned much less than it is (the 90-degree p15 as 55), and the
# identity offset, put back in that pose, moves features across the face rather than
# along it. On the 20 swaps onto p15: dlib found no face in 7 of them instead of 9,
# the landmark error 0.59 -> 0.53; p19, read at 39 degrees, needs its shape (0.40 ->
# 0.42 without).
PROFILE_SHAPE_YAW = (40.0, 50.0)
# A target read as turned past PROFILE_KEEP_YAW[0] degrees (in full from [1]) keeps its
# own far half and lower face. Read at 55 degrees, the 90-degree p15's mesh lays its far
# half (the far eye) over the nose bridge, and the near half's mouth corner and lips on
# the cheek in front of the ear: every swap onto it drew a second mouth there. The
# source shows in the near brow, temple and upper cheek; the profile's outline
# (nose, lips, chin) stays the target's. Over the 20 swaps onto p15: dlib found no
# face in 7 of them instead of 9, the landmark error 0.59 -> 0.46. Its near eye and a
# ring round it stay the target's too (EYES_HIDDEN_RING, as for a source whose eyes
# are not seen): a frontal photo's eye region, squeezed onto the profile's, drew its
# sockets' shading, make-up or a frame's rim as dark smudges there (p17, p30, p29).
PROFILE_KEEP_YAW = (45.0, 52.0)
# Where the target's own takes over, in the face's UV layout (the midline at u 0.5,
# the nose tip at v 0.535): from PROFILE_KEEP_FAR[0] into the far half (negative:
# on the near side of the midline) over a width of [1]; from v PROFILE_KEEP_LOW[0]
# down, over [1].
PROFILE_KEEP_FAR = (-0.03, 0.05)
PROFILE_KEEP_LOW = (0.48, 0.08)
# On such a target (the same ramp) the source shows only where its photo showed its
# skin well: its confidence (how squarely it faced the camera, not mirrored, no hair
# or frames; see SourceModel.confidence), blurred by PROFILE_QUALITY_BLUR of the
# texture's side, from PROFILE_QUALITY[0] (none of it) to [1] (all of it); elsewhere
# the target's own skin stays. What a profile's near cheek and temple take from a
# frontal photo is its cheek's side, seen edge-on, and what lies on it: hair curls at
# the temple, the shade turning away from the light, a frame's arm. On p15 they drew
# dark smudges and light bands across the cheek; over the 20 swaps onto it dlib found
# no face in 1 of them instead of 7, the landmark error 0.33 -> 0.14, d(out, src)
# 0.713 -> 0.713.
PROFILE_QUALITY = (0.35, 0.7)
PROFILE_QUALITY_BLUR = 0.03
# On such a target (the same ramp) the source also gives way where, after the colour
# and light match, its colour still differs from the target's own there, seen a
# PROFILE_AGREE_BLUR of the crop wide: by a CIE Lab distance (lightness counted at
# PROFILE_AGREE_L, since a profile's light falls off across it anyway) from
# PROFILE_AGREE[0] (none of it) to [1] (all of it). A frontal photo's side of the nose
# and eye socket, squeezed onto a profile's near half, brings its shading and what
# lies there: p27's shadowed side made a grey nose bridge and a pale patch under the
# eye, p17's brow an orange smear and her lower lid a blue arc, Obama's brow a dark
# bar. Where the colours agree the source still shows.
PROFILE_AGREE = (5.0, 12.0)
PROFILE_AGREE_L = 0.5
PROFILE_AGREE_BLUR = 0.02


@dataclass(frozen=True)
class SwapOptions:
    """Every setting of a swap, keyword-only where used.

    Attributes:
        fusion: 0 returns the target, 1 is a full swap; between, geometry and
            texture both move from the target's towards the source's, eased by
            :func:`fusion_mix` so that equal steps change the identity about equally,
            and the two faces' fine detail is kept at the level between theirs
            (see _keep_fused_detail), not averaged away.
        shape: how much of the source's identity shape the output takes at fusion 1;
            less on a target read as turned past 40 degrees, none past 50
            (PROFILE_SHAPE_YAW: the mesh reads a profile as turned much less than it is).
            A still target's brows take STILL_BROW_SHAPE of that: with no face at rest,
            the rest of their offset is the target's expression.
        color: ``none``, ``rct`` (Reinhard LAB), ``lct`` (linear covariance) or
            ``sh`` (spherical-harmonics relight plus a mean/std match on skin).
        blend: ``alpha``, ``multiband`` (Laplacian pyramid) or ``poisson``. With the
            first two, the face also takes the target's own colour along the mask's
            edge, fading inward (Poisson cloning does that by itself); in video it is
            followed over a tracked face's frames, so that it does not flicker.
        mask_mouth: keep the target's mouth interior (teeth, tongue) and the inner edge
            of its lips, cut at full resolution, as far as the frame shows it open
            (see _cut_mouth_gap), and where its lips meet (a closed mouth), the line
            between them.
        mask_lips: keep the target's own lips, as Deep-Live-Cam's mouth mask does: the
            mouth moves and shapes as the target's does, crisp (a smiling source's lips
            are stretched thin and go soft when drawn onto a relaxed or talking
            mouth), at the cost of the source's lips, part of its likeness.
        mask_eyes: always keep the target's eyes (eyeballs, gaze) inside the lids; they
            are kept anyway where the source's eyes are not seen (see eyes_seen).
        gaze: where the source's irises look: ``target`` (they follow the target's
            irises: a video's eyes move) or ``source`` (where the source photo's
            looked within its lids: a photo looking into the camera gives eye
            contact). Either way an iris keeps its round shape and the photo's size
            against the eye (:mod:`faceweave.core.eyeball`).
        mask_glasses: keep the target's spectacle frames in front of the swapped face
            (found when a frame's bridge crosses the nose; faces at least 80 px), and
            its tinted or dark lenses (found by the tint and darkness of the skin
            around both eyes; faces at least 40 px).
        mask_hands: keep the target's hands in front of its faces (a chin on a fist,
            fingers at the cheek, a hand round a microphone at the mouth): MediaPipe's
            hand landmarker looks round each face (:mod:`faceweave.analysis.hands`),
            and each hand it finds is laid back over the swap
            (:func:`faceweave.core.hands.keep_hands`). It costs 10-25 ms a face on this
            project's 2-core machine (a median of 12.5 on the development photos'
            faces, most of them with no hand near; see ``benchmarks/hands.py``).
        feather: width of the mask's soft edge, as a fraction of the face's UV size.
        mask_padding: (top, right, bottom, left), how much of the face mask to give
            back to the target from each side, as fractions of the face's height and
            width in face space (a target's beard: ``(0, 0, 0.2, 0)``; its fringe:
            ``(0.15, 0, 0, 0)``). Right and left are the image's for a frontal face.
        detail: how far the source's fine detail (pores, wrinkles, grain) is toned down
            to the target's level when the source is sharper: 0 keeps the source's
            detail, 1 matches the target's (a crisp face pasted on a softer video
            reads as pasted, and shimmers as it moves). Never sharpens. A face drawn
            well above ``process_size`` also takes the photo's detail finer than that
            size from its fine texture (:attr:`SourceModel.fine`), toned down alike,
            and where the photo has less than the target, a face-locked grain makes
            up the difference by the same amount (0: none).
        light: how far the target's broad light and shade (a side light, a shadowed
            cheek) replace the source's on skin, after the colour match: 0 keeps the
            source's own shading (a flat sticker under a side light), 1 takes the
            target's fully (its cheekbones and sockets start to show through).
            Not used with ``color="sh"``, which relights by its own model.
        creases: how much of the creases the target's expression makes (frown lines
            between the brows, crow's feet at a wink, a wrinkled nose) the source's
            skin takes: 1 all of them, 0 none. Known in a video, where the
            tracker keeps the target's skin at rest (``Face.rest_detail``; see
            :mod:`faceweave.core.creases`); a still image has no rest to tell an
            expression's crease from a wrinkle of the target's own, and takes only
            the folds beside a smile wider than the source's (its detail in the
            smile's band where darker than the source's: see _lay_smile_folds).
        uv_size: side of the UV texture in texels.
        work_size: faces are rasterised at most this many pixels wide.
        process_size: faces are swapped at most this many pixels wide, then
            composited back into the full-resolution frame.

    ``uv_size``, ``work_size`` and ``process_size`` are 32 to 2048 (MAX_WORK_SIDE).
    """

    fusion: float = 1.0
    shape: float = 1.0
    color: str = "lct"
    blend: str = "multiband"
    mask_mouth: bool = True
    mask_lips: bool = False
    mask_eyes: bool = False
    gaze: str = "target"
    mask_glasses: bool = True
    mask_hands: bool = False
    feather: float = 0.03
    mask_padding: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
    detail: float = 1.0
    light: float = 0.5
    creases: float = 1.0
    uv_size: int = 384
    work_size: int = 64
    process_size: int = 224

    def __post_init__(self) -> None:
        # A list (JSON, argparse) becomes a tuple of floats, so options stay hashable.
        try:
            # (numbers only: a string's characters, "0000", or bools had passed as them)
            numbers = list(self.mask_padding)
            padding = (
                tuple(float(v) for v in numbers)
                if all(map(is_real_number, numbers))
                and not isinstance(self.mask_padding, str | bytes | bytearray)
                else None
            )
        except TypeError:
            padding = None  # validated() says what is wrong
        if padding is not None:
            object.__setattr__(self, "mask_padding", padding)
        self.validated()  # options are checked where they are made: SwapOptions(fusion=5) fails

    @classmethod
    def from_kwargs(cls, options: Mapping[str, object]) -> SwapOptions:
        """Validated options from keyword arguments (the Python API's ``**options``).

        Raises:
            UsageError: a name that is no option, or a value of the wrong kind or range.
        """
        known = [f.name for f in fields(cls)]
        unknown = [name for name in options if name not in known]
        if unknown:
            raise UnknownOptionError(
                f"unknown swap option {unknown[0]!r}; options are: {', '.join(known)}"
            )
        return cls(**options)  # type: ignore[arg-type]  # (checked as it is made)

    @classmethod
    def from_settings(cls, settings: object) -> SwapOptions:
        """Validated options from any object carrying some of these fields as attributes
        (parsed command-line arguments, a service job's options); the rest, and those
        set to None (an option not given), keep their defaults, so a new option reaches
        every front end from here."""
        given = {f.name: getattr(settings, f.name, None) for f in fields(cls)}
        return cls(**{n: v for n, v in given.items() if v is not None})  # (checked as made)

    def validated(self) -> SwapOptions:
        self._check_kinds()
        if not 0.0 <= self.fusion <= 1.0:
            raise UsageError(f"fusion must be within [0, 1], got {self.fusion}")
        if not 0.0 <= self.shape <= 1.0:
            raise UsageError(f"shape must be within [0, 1], got {self.shape}")
        if self.color not in COLOR_MODES:
            raise UsageError(
                f"unknown colour mode {self.color!r}; choose from {', '.join(COLOR_MODES)}"
            )
        if self.blend not in BLEND_MODES:
            raise UsageError(
                f"unknown blend mode {self.blend!r}; choose from {', '.join(BLEND_MODES)}"
            )
        if self.gaze not in GAZE_MODES:
            raise UsageError(f"unknown gaze {self.gaze!r}; choose from {', '.join(GAZE_MODES)}")
        if not 0.0 <= self.detail <= 1.0:
            raise UsageError(f"detail must be within [0, 1], got {self.detail}")
        if not 0.0 <= self.light <= 1.0:
            raise UsageError(f"light must be within [0, 1], got {self.light}")
        if not 0.0 <= self.creases <= 1.0:
            raise UsageError(f"creases must be within [0, 1], got {self.creases}")
        if not 0.0 <= self.feather <= 0.5:
            raise UsageError(f"feather must be within [0, 0.5], got {self.feather}")
        # __post_init__ made any sequence of numbers a tuple of floats.
        padding = self.mask_padding
        if (
            not isinstance(padding, tuple)
            or isinstance(self.mask_padding, str | bytes | bytearray)
            or len(padding) != 4
            or not all(is_real_number(v) and 0.0 <= v < 1.0 for v in padding)
        ):
            raise UsageError(
                "mask_padding must be 4 fractions (top, right, bottom, left) within [0, 1), "
                f"got {self.mask_padding}"
            )
        top, right, bottom, left = padding
        if top + bottom > 0.9 or left + right > 0.9:
            raise UsageError(
                "mask_padding leaves no face: top + bottom and left + right must be at "
                f"most 0.9, got {self.mask_padding}"
            )
        if min(self.uv_size, self.work_size, self.process_size) < 32:
            raise UsageError("uv_size, work_size and process_size must be at least 32")
        if max(self.uv_size, self.work_size, self.process_size) > MAX_WORK_SIDE:
            raise UsageError(f"uv_size, work_size and process_size must be at most {MAX_WORK_SIDE}")
        return self

    def _check_kinds(self) -> None:
        """Each option of the kind its default is (numpy scalars are taken as Python's);
        a string fusion, a None shape or a "no" for a switch is a UsageError."""
        for option in fields(self):
            value = getattr(self, option.name)
            default = option.default
            if isinstance(default, bool):
                if not isinstance(value, bool | np.bool_):
                    raise UsageError(f"{option.name} must be True or False, got {value!r}")
                object.__setattr__(self, option.name, bool(value))
            elif isinstance(default, int):
                if not is_whole_number(value):
                    raise UsageError(f"{option.name} must be a whole number, got {value!r}")
                object.__setattr__(self, option.name, int(value))
            elif isinstance(default, float):
                if not is_real_number(value):
                    raise UsageError(f"{option.name} must be a number, got {value!r}")
                object.__setattr__(self, option.name, float(value))
            elif isinstance(default, str) and not isinstance(value, str):
                raise UsageError(f"{option.name} must be a string, got {value!r}")


# Skin vertices used to fit lighting: the mesh minus eyes, brows, lips, irises.
@functools.lru_cache(maxsize=4)
def _skin_vertices(model: FaceModel) -> NDArray[np.int32]:
    exclude: set[int] = set()
    for name in ("lips", "left_eye", "right_eye", "left_eyebrow", "right_eyebrow", "irises"):
        exclude.update(model.regions[name].tolist())
    for loop in model.loops:
        exclude.update(loop.tolist())
    return np.array([i for i in range(468) if i not in exclude], np.int32)


@functools.lru_cache(maxsize=4)
def _identity_shape(model: FaceModel) -> IdentityShape:
    return IdentityShape(model)  # a dense Laplace solve: once per face model


@functools.lru_cache(maxsize=4)
def _brow_lift(model: FaceModel) -> BrowLift:
    return BrowLift(model)  # a dense Laplace solve: once per face model


@functools.lru_cache(maxsize=4)
def _uv_skin(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """Texels on skin triangles (no eye, brow, lip or hole vertex)."""
    return _uv_triangles_within(model, size, _skin_vertices(model))


def _uv_triangles_within(
    model: FaceModel, size: int, vertices: NDArray[np.integer]
) -> NDArray[np.bool_]:
    """Texels on the triangles whose three vertices are all among ``vertices``."""
    within = set(np.asarray(vertices).tolist())
    tris = model.render_triangles
    inside = np.array([all(v in within for v in t) for t in tris.tolist()], bool)
    raster = model.uv_raster(size)
    return np.asarray(raster.covered & inside[np.maximum(raster.triangle, 0)])


# The brows (BROW_OUTLINES) left out of the light match's skin, grown by this fraction
# of the texture.
LIT_BROW_GROW = 0.005


@functools.lru_cache(maxsize=4)
def _uv_lit(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """Texels whose light the light match compares (see _match_light): the skin
    triangles and those touching a brow's outline, less the brows themselves (their
    outlines, grown by LIT_BROW_GROW). Skin-only triangles leave out the skin between
    the brows and along their ridges, whose light the match then took from the nose
    bridge's: a source's bright brow ridges and glabella (the astronaut's) were
    brightened further on a target lit evenly, a pale band round the brows."""
    keep = np.zeros(len(model.canonical_extended), bool)
    keep[_skin_vertices(model)] = True
    for name in ("left_eyebrow", "right_eyebrow"):
        keep[model.regions[name]] = True
    tris = model.render_triangles
    raster = model.uv_raster(size)
    lit = raster.covered & keep[tris].all(axis=1)[np.maximum(raster.triangle, 0)]
    brows = np.zeros((size, size), np.uint8)
    for outline in BROW_OUTLINES:
        corners = np.round(model.uv[list(outline)] * (size - 1)).astype(np.int32)
        cv2.fillPoly(brows, [corners], 1)
    grow = 2 * max(1, int(round(LIT_BROW_GROW * size))) + 1
    brows = cv2.dilate(brows, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (grow, grow)))
    lit = np.asarray(lit & (brows == 0))
    lit.setflags(write=False)
    return lit


@dataclass(frozen=True, eq=False)
class UVMasks:
    """Face-space masks for one set of options, at the UV resolution.

    Attributes:
        face: (S, S) float32 feathered face mask (soft towards the face oval).
        source_weight: (S, S) float32 where the source's texture may be used
            (0 in the mouth opening with ``mask_mouth``, on the lips with
            ``mask_lips`` and in the eyes' openings with ``mask_eyes``).
        skin: (S, S) bool texels used for colour statistics.
        edge: (S, S) float32, 1 at the face oval fading to 0 inwards: where the
            target's own hair, hands or background may overlap the fitted mesh.
        forehead: (S, S) float32, 1 on the forehead above the brows fading to 0 just
            over them: where the target's own fringe may hang (see _target_occluders).
        cheeks: (S, S) bool skin texels below the eyes: the target's skin colour is
            measured there, clear of a fringe.
        lit: (S, S) bool texels the light match compares the two faces' light on:
            ``skin`` and the skin around the brows (the brow ridges, the skin between
            them), not the brows themselves.
        glasses: (S, S) float32 where spectacle frames sit: a ring around each eye
            (brows included), the nose bridge between them and the temples out to
            the face's edge.
    """

    face: NDArray[np.float32]
    source_weight: NDArray[np.float32]
    skin: NDArray[np.bool_]
    edge: NDArray[np.float32]
    glasses: NDArray[np.float32]
    forehead: NDArray[np.float32]
    cheeks: NDArray[np.bool_]
    lit: NDArray[np.bool_]


def build_uv_masks(model: FaceModel, options: SwapOptions) -> UVMasks:
    size = options.uv_size
    raster = model.uv_raster(size)
    covered = raster.covered
    inside = _padded(covered, options.mask_padding).astype(np.uint8)
    dist = cv2.distanceTransform(np.pad(inside, 1), cv2.DIST_L2, 5)[1:-1, 1:-1]
    width = max(options.feather * size, 1.0)
    t = np.clip(dist / width, 0.0, 1.0)
    face = (t * t * (3 - 2 * t)).astype(np.float32)  # smoothstep: no visible edge in the ramp
    band = (1.0 - np.clip(dist / (0.22 * size), 0.0, 1.0)) * covered
    weight = covered.astype(np.float32)
    # The mouth interior (mask_mouth) is cut in image space, at full resolution (see
    # _cut_mouth): through the coarse UV lookup its edge came out stair-stepped.
    if options.mask_eyes:
        weight[_uv_eye_openings(model, size)] = 0.0
    k = max(3, int(size * 0.012) | 1)
    weight = np.minimum(cv2.GaussianBlur(weight, (k, k), 0), covered.astype(np.float32))
    if options.mask_lips:
        weight *= 1.0 - _uv_lips_band(model, size)
    if options.mask_mouth or options.mask_lips:
        # Where a closed mouth's lips meet, the line between them is the target's own:
        # the source's opening (a smiling photo's teeth) squeezed into that line drew
        # it pale (the source's texels there are no lips). Cut after the blur, so the
        # lips keep their own edge; an open mouth is cut in image space as well.
        weight[_uv_holes(model, size) == HOLE_MOUTH] = 0.0
    skin = _uv_skin(model, size) & (face > 0.5)
    return UVMasks(
        face=face,
        source_weight=weight.astype(np.float32),
        skin=skin,
        edge=band.astype(np.float32),
        glasses=_uv_glasses_band_at(model, size),
        forehead=_uv_forehead(model, size),
        cheeks=skin & (_uv_y(model, size) > float(model.canonical[model.loops[0], 1].max())),
        lit=_uv_lit(model, size) & (face > 0.5),
    )


# The forehead where a target's fringe is looked for (see _target_occluders): above
# FOREHEAD_ABOVE_BROWS[1] (canonical face units, the face is about 3 high) over the
# brows' top, fading to nothing at FOREHEAD_ABOVE_BROWS[0] over it; the brows
# themselves are the source's.
FOREHEAD_ABOVE_BROWS = (0.04, 0.12)


@functools.lru_cache(maxsize=4)
def _uv_forehead(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) the forehead zone's weight (FOREHEAD_ABOVE_BROWS), read-only."""
    brow_top = float(model.canonical[model.regions["left_eyebrow"], 1].min())
    near, far = FOREHEAD_ABOVE_BROWS
    height = brow_top - _uv_y(model, size)
    ramp = np.clip((height - near) / (far - near), 0.0, 1.0) * model.uv_raster(size).covered
    zone = np.asarray(ramp, np.float32)
    zone.setflags(write=False)
    return zone


def css_sides(values: object) -> tuple[float, float, float, float]:
    """(top, right, bottom, left) from 1, 2 or 4 numbers, as in CSS: one for all sides,
    (top and bottom, right and left), or each side (SwapOptions.mask_padding).

    Raises:
        UsageError: another count of values, or values that are not numbers.
    """
    items = list(values) if isinstance(values, (list, tuple)) else [values]
    sides = []
    for item in items:
        try:
            sides.append(float(item))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise UsageError(f"takes 1, 2 or 4 numbers, got {str(item)[:40]!r}") from None
    if len(sides) not in (1, 2, 4):
        raise UsageError(f"takes 1, 2 or 4 values (top right bottom left), got {len(sides)}")
    top, right, bottom, left = sides * (4 // len(sides))
    return top, right, bottom, left


def _padded(
    covered: NDArray[np.bool_], padding: tuple[float, float, float, float]
) -> NDArray[np.bool_]:
    """``covered`` less the given fractions of its extent at the top, right, bottom and
    left (SwapOptions.mask_padding)."""
    top, right, bottom, left = (float(v) for v in padding)
    if not (top or right or bottom or left):
        return covered
    ys, xs = np.nonzero(covered)
    u0, u1, v0, v1 = xs.min(), xs.max(), ys.min(), ys.max()
    yy, xx = np.mgrid[0 : covered.shape[0], 0 : covered.shape[1]]
    keep = (
        (yy >= v0 + top * (v1 - v0))
        & (yy <= v1 - bottom * (v1 - v0))
        & (xx >= u0 + left * (u1 - u0))
        & (xx <= u1 - right * (u1 - u0))
    )
    return np.asarray(covered & keep)


def _uv_glasses_band(
    model: FaceModel,
    hole: NDArray[np.integer],
    covered: NDArray[np.bool_],
    reach: float = GLASSES_REACH,
) -> NDArray[np.float32]:
    """(S, S) UV mask of where spectacle frames sit (see UVMasks.glasses), out to
    ``reach`` eye widths from the eye openings."""
    size = hole.shape[0]
    frames = np.zeros(hole.shape, bool)
    eyes = []
    for which in (HOLE_EYE_LEFT, HOLE_EYE_RIGHT):
        eye = (hole == which).astype(np.uint8)
        ys, xs = np.nonzero(eye)
        width = float(xs.max() - xs.min())
        eyes.append((xs.min(), xs.max(), ys.min(), ys.max(), width))
        # Distance from the eye opening: a frame's rim runs 0.1-0.75 eye widths out
        # (past the lashes, up to the brow and down to the top of the cheek; a large
        # frame's outer corner further, see GLASSES_SOURCE_REACH).
        dist = cv2.distanceTransform(1 - eye, cv2.DIST_L2, 5)
        frames |= (dist > 0.10 * width) & (dist < reach * width)
    (l0, l1, ly0, ly1, lw), (r0, r1, ry0, ry1, rw) = sorted(eyes)
    width, centre, top = (lw + rw) / 2, (ly0 + ly1 + ry0 + ry1) / 4, min(ly0, ry0)
    yy, xx = np.mgrid[0:size, 0:size]
    bridge = (xx > l1) & (xx < r0) & (yy > top - 0.35 * width) & (yy < centre)
    temples = ((xx < l0) | (xx > r1)) & (np.abs(yy - centre) < 0.3 * width)
    return ((frames | bridge | temples) & covered).astype(np.float32)


@dataclass(frozen=True, eq=False)
class SourceModel:
    """A source face prepared for swapping; built once and reused for every frame.

    Attributes:
        albedo: (S, S, 3) float32 BGR texture with the source's light divided out
            and hidden texels filled from their mirror.
        texture: (S, S, 3) float32 the same under the source's own light.
        valid: (S, S) float32 confidence that a texel saw the source (not mirrored/filled).
        occluder: (S, S) float32 likelihood that a texel shows hair, a hat or, at the
            lower face's edge, background or a collar rather than skin (those texels
            keep the target's pixels).
        shape: (478, 3) identity shape in pose-normalised (canonical) units.
        light: (9, 3) spherical-harmonics coefficients of the source's light.
        advice: what the source photo shows in every swap (:func:`source_advice`).
        confidence: (S, S) float32 how well the photo showed each texel: how squarely
            it faced the camera, halved where it came from its mirror, 0 where it is
            hidden, filled or covered (by hair). :func:`merge_sources` weighs several
            photos of one person by it. None: ``valid`` stands in.
        eyes: the eyeballs of the image-left and image-right eye openings in iris
            coordinates (:func:`faceweave.core.eyeball.eye_patch`), as photographed
            (they are white-balanced to each target when drawn); None for an eye
            the photo does not show clearly (the opening is then warped with the
            lids, as the rest of the face).
        fine: (2S, 2S) float32 the photo's luma finer than the processing size can
            show, at twice the texture's resolution, where the texture is the photo's
            own (0 elsewhere), for faces drawn larger than the processing size (see
            :func:`_fine_texture`); None: none drawn.
        glasses: whether the texture still shows the photo's glasses (found, and not
            painted out): on a target that wears its own, the band where frames sit
            is then left to the target, rather than two pairs of glasses.
    """

    albedo: NDArray[np.float32]
    texture: NDArray[np.float32]
    valid: NDArray[np.float32]
    occluder: NDArray[np.float32]
    shape: NDArray[np.float64]
    light: NDArray[np.float64]
    face: Face = field(repr=False)
    advice: tuple[str, ...] = ()
    confidence: NDArray[np.float32] | None = field(default=None, repr=False)
    eyes: tuple[eyeball.EyePatch | None, eyeball.EyePatch | None] = field(
        default=(None, None), repr=False
    )
    fine: NDArray[np.float32] | None = field(default=None, repr=False)
    glasses: bool = False


def _fit_light(
    frame: Frame,
    verts: NDArray[np.float32],
    normals: NDArray[np.float64],
    skin: NDArray[np.int32],
    scale: float,
) -> NDArray[np.float64]:
    """Fit SH light on skin vertices that face the camera, from a slightly blurred frame."""
    k = int(max(3, round(scale * 0.02)) | 1)
    x0 = int(max(0, np.floor(verts[:, 0].min()) - k))
    y0 = int(max(0, np.floor(verts[:, 1].min()) - k))
    x1 = int(min(frame.shape[1], np.ceil(verts[:, 0].max()) + k + 1))
    y1 = int(min(frame.shape[0], np.ceil(verts[:, 1].max()) + k + 1))
    region = cv2.GaussianBlur(frame[y0:y1, x0:x1], (k, k), 0).astype(np.float32)
    facing = normals[skin, 2] < -0.15
    idx = skin[facing]
    if len(idx) < 20:
        idx = skin
    pts = verts[idx, :2] - np.array([x0, y0], np.float32)
    samples = cv2.remap(
        region,
        pts[:, 0:1].copy(),
        pts[:, 1:2].copy(),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_REPLICATE,
    ).reshape(-1, 3)
    weights = np.clip(-normals[idx, 2], 0.05, 1.0)
    return lighting.fit_sh(normals[idx], samples.astype(np.float64), weights=weights)


def _clamped_shading(
    normals: NDArray[np.float64],
    light: NDArray[np.float64],
    fit_normals: NDArray[np.float64],
    skin: NDArray[np.int32],
) -> NDArray[np.float64]:
    """SH shading at vertices, clamped around the level seen on the fitted skin.

    An order-2 fit on one side of a face extrapolates wildly for normals it never
    saw (the far cheek of a profile): clamp to [0.35, 1.6] x the median skin level.
    """
    shading = lighting.shade(normals, light)
    seen = skin[fit_normals[skin, 2] < -0.15]
    ref = np.median(lighting.shade(fit_normals[seen if len(seen) else skin], light), axis=0)
    ref = np.maximum(ref, 1.0)
    return np.asarray(np.clip(shading, 0.35 * ref, 1.6 * ref))


# Beyond these a source still swaps, with a visible cost (see source_advice).
ADVICE_MAX_TURN_DEG = 30.0
ADVICE_MIN_FACE_PX = 64.0


def _face_list(faces: object) -> list[Face]:
    """``faces`` as a list of Face; InputError for anything else (None, a frame...)."""
    if isinstance(faces, list | tuple):
        wrong = [type(f).__name__ for f in faces if not isinstance(f, Face)]
        if not wrong:
            return list(faces)
        # (Naming the list alone, "got list", hid that one item was None.)
        raise InputError(
            f"expected a Face or a list of Face, got a {type(faces).__name__} with "
            f"{', '.join(sorted(set(wrong)))} in it"
        )
    raise InputError(f"expected a Face or a list of Face, got {type(faces).__name__}")


def check_face_points(face: Face, role: str) -> None:
    """An InputError when ``face``'s box or mesh is not finite (a Face built or edited
    by hand with NaN points; the analysers never give one): ``role`` names it."""
    points = np.asarray(face.landmarks_478, dtype=np.float64)
    if points.ndim != 2 or points.shape[0] < 468 or points.shape[1] < 2:
        raise InputError(f"the {role} face's landmarks_478 are {points.shape}, not (478, 3)")
    if not np.isfinite(points).all() or not np.isfinite(np.asarray(face.bbox, float)).all():
        raise InputError(f"the {role} face's box or landmarks are not finite (NaN or infinity)")


def target_faces(frame: Frame, faces: object) -> list[Face]:
    """``faces`` (a Face or a list of them) checked to be found in ``frame``, which is
    checked to be a frame.

    Raises:
        InputError: ``frame`` is not a uint8 (H, W, 3) BGR image, ``faces`` is not a
            Face or a list of them, or one was found in a frame of another size or has
            points that are not finite.
    """
    check_frame(frame)
    targets = [faces] if isinstance(faces, Face) else _face_list(faces)
    for face in targets:
        check_face_points(face, "target")
        if tuple(face.frame_shape) != frame.shape[:2]:
            height, width = face.frame_shape
            raise InputError(
                f"the face was found in a {width}x{height} frame, not in this "
                f"{frame.shape[1]}x{frame.shape[0]} one: analyse the frame it is swapped in"
            )
    return targets


def source_advice(face: Face) -> list[str]:
    """What about a source face will show in every swap made from it, one line each.

    The texture comes from this one photo: a turned head has one side seen obliquely
    or not at all (it is filled from the visible side, mirrored), a small face has
    no detail to give, closed or hidden eyes give none (each target keeps its own),
    glasses are part of the face's texture, and a wide-open mouth's stretched lips and
    chin are too. Empty for a frontal face of a good size with open eyes, without
    glasses, its mouth not wide open.

    Raises:
        InputError: ``face`` is not a Face.
    """
    if not isinstance(face, Face):
        raise InputError(f"expected a Face, got {type(face).__name__}")
    return _advice(face, eyes_seen(face), _wears_glasses(face))


def _advice(face: Face, eyes: float, glasses: bool, hands: bool = False) -> list[str]:
    """source_advice's lines, given the face's eye check and glasses check (and, from
    prepare_source, whether a hand covers part of the face)."""
    advice: list[str] = []
    yaw, pitch = face.pose.yaw, face.pose.pitch
    if abs(yaw) > ADVICE_MAX_TURN_DEG:
        advice.append(
            f"source face is turned {abs(yaw):.0f} degrees to the side: its far side is "
            "filled from its near side; a frontal photo swaps better"
        )
    if abs(pitch) > ADVICE_MAX_TURN_DEG:
        way = "down" if pitch > 0 else "up"
        advice.append(
            f"source face is tilted {abs(pitch):.0f} degrees {way}: parts of it are seen "
            "obliquely; a frontal photo swaps better"
        )
    if face.size < ADVICE_MIN_FACE_PX:
        advice.append(
            f"source face is only {face.size:.0f} px wide: swapped faces will look soft; "
            f"a photo with the face at least {2 * ADVICE_MIN_FACE_PX:.0f} px wide swaps better"
        )
    if eyes < 0.5:
        advice.append(
            "source face's eyes are closed or hidden (tinted glasses): each target keeps "
            "its own eyes; a photo with open eyes swaps better"
        )
    if glasses:
        advice.append(
            "source face wears glasses: they are painted out where that leaves no "
            "traces, else carried into every swap; a photo without them swaps better"
        )
    if _mouth_opening(face.landmarks_478) > MOUTH_OPEN_WIDE:
        advice.append(
            "source face's mouth is wide open (a laugh, a scream): its stretched lips and "
            "chin show in every swap; a photo with the mouth closed swaps better"
        )
    if hands:
        advice.append(
            "a hand covers part of the source face: its skin there is taken from the "
            "other side of the face, or left to each target; a photo without it swaps better"
        )
    return advice


# The hand finder of source photos (see _source_hands), one a process: built on first
# use, its graph locked per call.
_SOURCE_HANDS: list[MediaPipeHands] = []
_SOURCE_HANDS_LOCK = threading.Lock()


def _source_hands(
    image: Frame, face: Face, map_xy: NDArray[np.float32]
) -> NDArray[np.float32] | None:
    """(S, S) 0..1: the texels of a source's texture (``map_xy``: each texel's photo
    position) that a hand in front of the face covers in its photo, or None when no
    hand does. A chin on a fist or fingers at the cheek are no part of the face, and
    drawn into the texture they showed on every target (Chandler's knuckles, img_p05,
    as a pale blotch beside each target's mouth)."""
    with _SOURCE_HANDS_LOCK:
        if not _SOURCE_HANDS:
            _SOURCE_HANDS.append(MediaPipeHands())
        finder = _SOURCE_HANDS[0]
    hands = finder.find(image, [face.bbox])
    if not hands:
        return None
    x0, y0, x1, y1 = face_crop(face.bbox, image.shape)
    if x1 <= x0 or y1 <= y0:
        return None
    held = hands_area([hand.landmarks for hand in hands], (y1 - y0, x1 - x0), offset=(x0, y0))
    texels = cv2.remap(
        held,
        map_xy[..., 0] - np.float32(x0),
        map_xy[..., 1] - np.float32(y0),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
    )
    if float(texels.max()) < 0.5:
        return None  # near the face, not over it
    # Grown by a texel or two: the silhouette's edge is a pixel or two off the hand's.
    grown = cv2.dilate(texels, np.ones((5, 5), np.uint8))
    return np.asarray(np.clip(grown, 0.0, 1.0), np.float32)


def eyes_seen(face: Face, image: Frame | None = None) -> float:
    """How surely the face's eyes are open and seen in its photo, 0 to 1.

    An open eye's opening (the mesh's eye contour) holds the white of the eye and
    the iris, so its lightness spans a wide range; a closed lid, a squint or a tinted
    lens shows one flat tone. The two eyes' spans are averaged (a profile's far eye
    has few pixels; a wink lands near the middle) and ramped over EYES_SEEN_RANGE.
    Faces too small to tell read as seen (1.0).
    """
    image = face.frame if image is None else image
    if image is None or face.size < EYES_MIN_FACE_PX:
        return 1.0
    model = load_face_model()
    spans = []
    h, w = image.shape[:2]
    for name in ("left_eye", "right_eye"):
        points = np.asarray(face.landmarks_478[model.regions[name], :2], np.float32)
        x0, y0 = np.maximum(np.floor(points.min(0)).astype(int), 0)
        x1, y1 = np.minimum(np.ceil(points.max(0)).astype(int) + 1, (w, h))
        if x1 - x0 < 2 or y1 - y0 < 2:
            continue
        hull = cv2.convexHull(points - np.array([x0, y0], np.float32)).astype(np.int32)
        inside = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillConvexPoly(inside, hull, 1)
        crop = image[y0:y1, x0:x1]
        grey = crop if crop.ndim == 2 else cv2.cvtColor(crop, cv2.COLOR_BGR2Lab)[..., 0]
        values = grey[inside > 0]
        if values.size >= 4:
            spans.append(_span(values))  # (a sort: np.percentile's overhead is most of it)
    if not spans:
        return 1.0
    return _ramp(float(np.mean(spans)), EYES_SEEN_RANGE)


def _ramp(value: float, bounds: tuple[float, float]) -> float:
    """0 at or below ``bounds[0]``, 1 at or above ``bounds[1]``, linear between."""
    lo, hi = bounds
    return float(min(max((value - lo) / (hi - lo), 0.0), 1.0))


def _profile_kept(
    face: Face,
    u_map: NDArray[np.float32],
    v_map: NDArray[np.float32],
    model: FaceModel,
    uv_size: int,
) -> NDArray[np.float32] | None:
    """(H, W) how much of a target read as a profile stays its own where each pixel
    finds the texture at (``u_map``, ``v_map``), in texels of a ``uv_size`` texture:
    its far half, its lower face and its near eye, in full past PROFILE_KEEP_YAW (see
    there). None for a target turned less (nothing of it kept)."""
    strength = _ramp(abs(face.pose.yaw), PROFILE_KEEP_YAW)
    if strength <= 0.0:
        return None
    x = face.landmarks_478[:, 0]
    # The far half is the narrower in the image: from the nose bridge (168) to the
    # cheek's edge (234 on the u < 0.5 side, 454 on the other).
    far = -1.0 if abs(float(x[168] - x[234])) < abs(float(x[454] - x[168])) else 1.0
    to_uv = np.float32(1.0 / max(uv_size - 1, 1))
    into_far = (u_map * to_uv - np.float32(0.5)) * np.float32(far)
    start, width = PROFILE_KEEP_FAR
    kept = np.clip((into_far - np.float32(start)) * np.float32(1.0 / width), 0.0, 1.0)
    start, width = PROFILE_KEEP_LOW
    low = np.clip((v_map * to_uv - np.float32(start)) * np.float32(1.0 / width), 0.0, 1.0)
    # The eyes and a ring round them (as for a source whose eyes are not seen).
    eyes = cv2.remap(
        _uv_hidden_eyes(model, uv_size),
        u_map,
        v_map,
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
    )
    return np.asarray(np.maximum(np.maximum(kept, low), eyes) * np.float32(strength), np.float32)


def _profile_quality(source: SourceModel, uv_size: int) -> NDArray[np.uint8]:
    """(S, S) uint8: how much of the source a target read as a profile shows at each
    texel (255: all of it; see PROFILE_QUALITY)."""
    confidence = (
        source.valid * (1.0 - source.occluder) if source.confidence is None else source.confidence
    )
    blurred = cv2.GaussianBlur(
        np.asarray(confidence, np.float32), (0, 0), max(PROFILE_QUALITY_BLUR * uv_size, 0.5)
    )
    low, high = PROFILE_QUALITY
    return np.round(np.clip((blurred - low) / (high - low), 0.0, 1.0) * 255.0).astype(np.uint8)


def _colour_disagreement(
    source: NDArray[np.float32], target: NDArray[np.float32]
) -> NDArray[np.float32]:
    """(H, W) 0..1: how far two BGR images (0..255, the same size) differ in colour,
    each blurred by PROFILE_AGREE_BLUR of its larger side, through PROFILE_AGREE (see
    there): 0 where they agree, 1 where they differ by PROFILE_AGREE[1] or more."""
    sigma = max(PROFILE_AGREE_BLUR * max(source.shape[:2]), 0.5)

    def lab(image: NDArray[np.float32]) -> NDArray[np.float32]:
        scaled = np.asarray(image, np.float32) * np.float32(1.0 / 255.0)
        return np.asarray(cv2.GaussianBlur(cv2.cvtColor(scaled, cv2.COLOR_BGR2Lab), (0, 0), sigma))

    diff = lab(source) - lab(target)
    diff[..., 0] *= np.float32(PROFILE_AGREE_L)
    distance = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
    low, high = PROFILE_AGREE
    return np.clip((distance - low) * np.float32(1.0 / (high - low)), 0.0, 1.0).astype(np.float32)


@functools.lru_cache(maxsize=4)
def _uv_hidden_eyes(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) the eye openings and a ring EYES_HIDDEN_RING eye widths around them,
    feathered: where a source whose eyes are not seen gives way to the target."""
    eyes = _uv_eye_openings(model, size).astype(np.uint8)
    dist = cv2.distanceTransform(1 - eyes, cv2.DIST_L2, 5)
    reach = EYES_HIDDEN_RING * _uv_eye_width(model, size)
    ramp = np.clip((reach - dist) / max(0.4 * reach, 1.0) + 0.5, 0.0, 1.0)
    return (ramp * ramp * (3 - 2 * ramp)).astype(np.float32)


def _wears_glasses(face: Face) -> bool:
    """Whether the face (in its own photo) wears glasses (see _glasses_in_photo)."""
    return _glasses_found(_glasses_in_photo(face, face.frame))


def _glasses_found(found: tuple[float, object, object, object, object] | None) -> bool:
    """Whether a _glasses_in_photo result reads as a face with glasses: a photo either
    has them or not."""
    return found is not None and found[0] >= 0.5


def _glasses_in_photo(
    face: Face, image: Frame | None
) -> tuple[float, NDArray[np.uint8], Frame, tuple[int, int], float] | None:
    """Glasses on a face in its photo, by the test the swap uses on targets
    (_glasses_bridge) at the scale targets are processed at: ``(strength, line
    kernel, face crop, crop origin, crop scale)``, or None without glasses."""
    if image is None or face.size < GLASSES_MIN_FACE_PX:
        return None
    points = np.asarray(face.landmarks_478[:, :2], np.float32)
    eye_width = float(np.linalg.norm(points[33] - points[133]))
    scale = min(1.0, 32.0 / max(eye_width, 1.0))  # a 224 px face crop's eye width
    h, w = image.shape[:2]
    x0, y0 = (int(v) for v in np.clip(np.floor(points.min(0)).astype(int) - 8, 0, None))
    x1 = min(w, int(np.ceil(points[:, 0].max())) + 9)
    y1 = min(h, int(np.ceil(points[:, 1].max())) + 9)
    if x1 - x0 < 8 or y1 - y0 < 8:
        return None
    crop = image[y0:y1, x0:x1]
    if scale < 1.0:
        crop = cv2.resize(crop, None, fx=scale, fy=scale, interpolation=cv2.INTER_AREA)
    found = _glasses_bridge(crop, (points - np.array([x0, y0], np.float32)) * scale)
    if found is None:
        return None
    strength, kernel = found
    return strength, kernel, crop, (x0, y0), scale


def _paint_out_source_glasses(
    albedo: NDArray[np.float32], hole: NDArray[np.uint8], model: FaceModel
) -> NDArray[np.float32]:
    """The source's glasses frames replaced by its skin in the face-space texture, so
    they are not carried, flat, onto every target.

    The frames are found in the photo (_glasses_in_photo; a photo that reads as
    wearing glasses at all has them painted out fully) and carried into face space
    (``hole``, from _source_frame_texels). Each frame texel then takes the
    mean of the skin texels around it (eyes, brows and lips excluded, so none of them
    bleeds in), from a neighbourhood a few frame widths across, or further where no
    skin is that near (_skin_fill). Thick, translucent or faint frames are only partly
    found, and painting out part of a frame leaves rings around the eyes that look
    worse than the glasses: unless the texture painted from nearby skin keeps under
    GLASSES_PAINTED_RESIDUE of the strong lines around the eyes, the texture is left
    as it was. The brows (_uv_brows) keep their own texels either way.
    """
    if not hole.any():
        return albedo
    size = albedo.shape[0]
    band = _uv_glasses_band_at(model, size, GLASSES_SOURCE_REACH) > 0.5
    fill, near = _skin_fill(albedo, _uv_skin(model, size) & (hole == 0))
    alpha = cv2.GaussianBlur(hole.astype(np.float32), (3, 3), 0)
    painted = np.asarray(albedo + alpha[..., None] * (fill - albedo), np.float32)
    # The check below looks at the frames painted from nearby skin only (``near``).
    # Thick frames (Grace Hopper's) lie partly far from any skin: over the brows,
    # with tinted lenses between. Painted from far away they become blotches, worse
    # than the glasses; from near skin they leave strong lines, and are kept.
    from_near = np.asarray(albedo + (alpha * near)[..., None] * (fill - albedo), np.float32)
    # Strong lines around the eyes before and after, on a common 8-bit scale.
    k = int(max(3, round(0.25 * _uv_eye_width(model, size)))) | 1
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    # A robust top: the single brightest texel (a highlight at the mesh's edge) once
    # set the scale, by up to 3x between sources (p29: 7.4 against 2.2 at 99.5%).
    covered = model.uv_raster(size).covered
    top = max(GLASSES_SCALE_TOP * float(np.percentile(albedo[covered], 99.5)), 1e-6)

    def strong_lines(texture: NDArray[np.float32]) -> int:
        u8 = np.round(np.clip(texture * (255.0 / top), 0.0, 255.0)).astype(np.uint8)
        return int(((_line_contrast(u8, kernel) > GLASSES_BRIDGE_CONTRAST) & band).sum())

    before = strong_lines(albedo)
    if before == 0 or strong_lines(from_near) > GLASSES_PAINTED_RESIDUE * before:
        return albedo
    # The brows stay the photo's: the lines found in the photo take in a brow next to
    # a frame's rim, and it was painted out with the frame (p29 lost one brow to a pale
    # patch on every target, the 108 px man of p12 kept his in broken blocks).
    brows = _uv_brows(model, size)
    return np.asarray(painted + brows[..., None] * (albedo - painted), np.float32)


# The brows' outline in the face mesh: the upper edge's points, then the lower edge's
# back (MediaPipe's numbering), for the brow on each side. Taken in by BROW_SHRINK of
# an eye's width (a frame's rim along the lower edge stays out) and feathered by half
# that (see _uv_brows).
BROW_OUTLINES = (
    (70, 63, 105, 66, 107, 55, 65, 52, 53, 46),
    (300, 293, 334, 296, 336, 285, 295, 282, 283, 276),
)
BROW_SHRINK = 0.05


@functools.lru_cache(maxsize=4)
def _uv_brows(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) float32 the brows in the texture: 1 inside their outlines (BROW_OUTLINES)
    taken in by BROW_SHRINK of an eye's width, feathered."""
    mask = np.zeros((size, size), np.uint8)
    for outline in BROW_OUTLINES:
        points = np.round(model.uv[list(outline)] * (size - 1)).astype(np.int32)
        cv2.fillPoly(mask, [points], 1)
    shrink = BROW_SHRINK * _uv_eye_width(model, size)
    k = int(round(2 * shrink)) | 1
    mask = cv2.erode(mask, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    return np.asarray(cv2.GaussianBlur(mask.astype(np.float32), (0, 0), max(shrink / 2, 0.5)))


def _source_frame_texels(
    found: tuple[float, NDArray[np.uint8], Frame, tuple[int, int], float],
    band: NDArray[np.bool_],
    map_xy: NDArray[np.float32],
    mirrored: NDArray[np.float32],
) -> NDArray[np.uint8]:
    """(S, S) uint8 1 on the texels a source's glasses frames cover: the strong lines
    _glasses_in_photo found in the photo, carried into face space by the texture's
    lookup (``map_xy``; mirrored where the texture took the mirror texel), within the
    glasses ``band``, grown by two texels."""
    _, line_kernel, crop, (x0, y0), scale = found
    line = (_line_contrast(crop, line_kernel) > GLASSES_SOURCE_CONTRAST).astype(np.float32)
    mx = np.ascontiguousarray((map_xy[..., 0] - x0) * scale, np.float32)
    my = np.ascontiguousarray((map_xy[..., 1] - y0) * scale, np.float32)
    frames = cv2.remap(line, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    frames += mirrored * (frames[:, ::-1] - frames)
    hole = ((frames > 0.2) & band).astype(np.uint8)
    return np.asarray(cv2.dilate(hole, np.ones((5, 5), np.uint8)), np.uint8)


def _joined(grow: NDArray[np.bool_], seeds: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """The texels of ``grow | seeds`` 8-connected through them to a ``seeds`` texel
    (the seeds with the parts of ``grow`` that reach them)."""
    both = grow | seeds
    count, labels = cv2.connectedComponents(both.astype(np.uint8), connectivity=8)
    reached = np.zeros(count, bool)
    reached[labels[seeds]] = True
    reached[0] = False  # label 0: outside ``both``
    return np.asarray(reached[labels], bool)


def _eye_outer_x(model: FaceModel) -> float:
    """How far the eyes' outer corners lie from the midline (canonical x)."""
    return float(np.abs(model.canonical[model.loops[0], 0]).max())


def _with_dark_blocks(
    frames: NDArray[np.uint8], albedo: NDArray[np.float32], model: FaceModel
) -> NDArray[np.uint8]:
    """``frames`` (see _source_frame_texels) with the dark texels joined to them in the
    source's glasses band at the temples, and the small gaps they enclose: a hinge's
    solid block has no line inside it (p29's was left as a dark spot at every
    target's temple), a glint on it none around it. Dark: under FRAME_DARK of the
    cheeks' median brightness. Only past the eyes' outer corners and not near the
    eye openings: between the eyes the brows, lashes and an eye's corner are dark
    and lie along the rims."""
    size = frames.shape[0]
    luma = albedo @ color_ops.LUMA_BGR.astype(np.float32)
    cheeks = _uv_cheeks(model, size) & model.uv_raster(size).covered & (frames == 0)
    if int(cheeks.sum()) < 50:
        return frames
    band = _uv_glasses_band_at(model, size, GLASSES_SOURCE_REACH) > 0.5
    temples = band & (np.abs(_uv_x(model, size)) > _eye_outer_x(model))
    temples &= ~_uv_near_eyes(model, size)
    dark = (luma < FRAME_DARK * float(np.median(luma[cheeks]))) & temples
    out = np.maximum(frames, _joined(dark, frames > 0).astype(np.uint8))
    # And what they enclose, when it is small (a glint on the hinge; not a lens).
    _, labels, stats, _ = cv2.connectedComponentsWithStats(1 - out, connectivity=4)
    area = stats[:, cv2.CC_STAT_AREA]
    left, top = stats[:, cv2.CC_STAT_LEFT], stats[:, cv2.CC_STAT_TOP]
    right, bottom = left + stats[:, cv2.CC_STAT_WIDTH], top + stats[:, cv2.CC_STAT_HEIGHT]
    small = (area < FRAME_HOLE_MAX * size * size) & (left > 0) & (top > 0)
    small &= (right < size) & (bottom < size)
    small[0] = False  # the frames themselves
    return np.asarray(np.maximum(out, (small[labels] & temples).astype(np.uint8)), np.uint8)


def _skin_fill(
    albedo: NDArray[np.float32], skin: NDArray[np.bool_]
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Every texel's mean of the ``skin`` texels around it, and where that came from
    near skin (1) rather than the last, wide pass (0).

    Near skin first (a few texels), farther where none is near. A frame's bar through
    the brows (not skin) lies far from any: the last pass reaches it (without it,
    p29's bar stayed as a dark dash above one eye on every target)."""
    size = albedo.shape[0]
    weights = skin.astype(np.float32)
    # The skin's colour and its weight in one array: one blur per pass.
    stacked = cv2.merge([*cv2.split(np.asarray(albedo * weights[..., None], np.float32)), weights])
    fill = np.zeros((size * size, 3), np.float32)
    known = np.zeros(size * size, bool)
    near = known
    for spread, enough in SKIN_FILL_PASSES:
        sigma = size * spread
        # A wide blur is smooth: worked out on a grid a quarter of sigma apart (at
        # full size the widest pass cost 60 ms at 384 texels).
        step = max(1, int(sigma // 4))
        if step > 1:
            small = cv2.resize(
                stacked, None, fx=1 / step, fy=1 / step, interpolation=cv2.INTER_AREA
            )
            blurred = cv2.resize(
                cv2.GaussianBlur(small, (0, 0), sigma * small.shape[0] / size),
                (size, size),
                interpolation=cv2.INTER_LINEAR,
            )
        else:
            blurred = cv2.GaussianBlur(stacked, (0, 0), sigma)
        flat = blurred.reshape(-1, 4)
        # Only the texels this pass decides (the division over all of them was most of
        # the cost).
        take = np.flatnonzero((flat[:, 3] > enough) & ~known)
        fill[take] = flat[take, :3] / flat[take, 3:]
        known[take] = True
        if spread < SKIN_FILL_PASSES[-1][0]:
            near = known.copy()
    if not known.all():
        fill[~known] = albedo[skin].mean(0) if skin.any() else albedo.reshape(-1, 3).mean(0)
    return fill.reshape(size, size, 3), near.reshape(size, size).astype(np.float32)


# _skin_fill's passes: (Gaussian sigma as a share of the texture's side, least share
# of skin under it for the pass to decide a texel).
SKIN_FILL_PASSES = ((0.015, 0.05), (0.05, 0.05), (0.15, 1e-3))


def _uv_holes(model: FaceModel, size: int) -> NDArray[np.intp]:
    """(S, S) which hole (mouth, eyes) each texel's triangle fills; -1 elsewhere."""
    raster = model.uv_raster(size)
    return np.where(raster.covered, model.hole_of_triangle[np.maximum(raster.triangle, 0)], -1)


@functools.lru_cache(maxsize=4)
def _uv_eye_openings(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """(S, S) texels in either eye opening (read-only, shared)."""
    hole = _uv_holes(model, size)
    eyes = (hole == HOLE_EYE_LEFT) | (hole == HOLE_EYE_RIGHT)
    eyes.setflags(write=False)
    return np.asarray(eyes)


@functools.lru_cache(maxsize=4)
def _uv_depth(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) each texel's distance in texels from the mesh's edge in UV space (0 off
    the mesh; read-only, shared: a source's preparation asks for it twice)."""
    covered = model.uv_raster(size).covered.astype(np.uint8)
    depth = cv2.distanceTransform(covered, cv2.DIST_L2, 3)
    depth.setflags(write=False)
    return np.asarray(depth)


@functools.lru_cache(maxsize=4)
def _uv_eye_width(model: FaceModel, size: int) -> float:
    """An eye opening's width in texels at one UV size."""
    xs = np.nonzero(_uv_holes(model, size) == HOLE_EYE_LEFT)[1]
    return float(xs.max() - xs.min()) if xs.size else size * 0.1


@functools.lru_cache(maxsize=8)
def _uv_glasses_band_at(
    model: FaceModel, size: int, reach: float = GLASSES_REACH
) -> NDArray[np.float32]:
    """UVMasks.glasses at one UV size (or out to another reach), without building the
    other masks."""
    return _uv_glasses_band(model, _uv_holes(model, size), model.uv_raster(size).covered, reach)


@functools.lru_cache(maxsize=4)
def _eye_layout(model: FaceModel) -> tuple[tuple[NDArray[np.int32], int, int, int], ...]:
    """Per eye opening (image-left, image-right): its lid ring, its first iris point
    (the iris centre; the contour follows) and its two corners."""
    layout = []
    for loop in model.loops[:2]:
        centre = model.canonical[loop, :2].mean(0)
        first = min(
            (468, 473), key=lambda i: float(np.linalg.norm(model.canonical[i, :2] - centre))
        )
        xs = model.canonical[loop, 0]
        layout.append((loop, first, int(loop[xs.argmin()]), int(loop[xs.argmax()])))
    return tuple(layout)


# The eye openings that the detail match measures apart and that a closing eye gives
# back to the target (see _eye_masks): grown by this share of the eye's width (the lash
# line), feathered over half as much.
EYE_DETAIL_GROW = 0.1


def _eye_masks(
    model: FaceModel, points: NDArray[np.float32], shape: tuple[int, int]
) -> list[tuple[tuple[slice, slice], NDArray[np.float32]] | None]:
    """Per eye opening of the output mesh (``points`` in processing-crop pixels): its
    box in the (H, W) image and, within it, float32 1 inside the opening grown by
    EYE_DETAIL_GROW of the wider eye's width to take in the lash line, feathered
    over half as much, 0 elsewhere (the box holds the feather); None for an opening out
    of the image."""
    layout = _eye_layout(model)
    grow = EYE_DETAIL_GROW * max(
        float(np.linalg.norm(points[left] - points[right])) for _, _, left, right in layout
    )
    sigma = max(0.5 * grow, 0.5)
    reach = int(np.ceil(grow + 3.0 * sigma)) + 1
    h, w = shape
    masks: list[tuple[tuple[slice, slice], NDArray[np.float32]] | None] = []
    for loop, *_ in layout:
        ring = points[loop]
        x0, y0 = np.maximum(np.floor(ring.min(0)).astype(int) - reach, 0)
        x1, y1 = np.minimum(np.ceil(ring.max(0)).astype(int) + reach + 1, (w, h))
        if x1 - x0 < 2 or y1 - y0 < 2:
            masks.append(None)
            continue
        box = np.zeros((y1 - y0, x1 - x0), np.uint8)
        at = np.round((ring - np.array([x0, y0], np.float32)) * 16.0).astype(np.int32)
        cv2.fillPoly(box, [at], 255, cv2.LINE_AA, shift=4)
        if grow >= 0.5:
            k = int(round(2 * grow)) | 1
            box = cv2.dilate(box, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
        soft = cv2.GaussianBlur(box.astype(np.float32) * np.float32(1 / 255), (0, 0), sigma)
        masks.append(((slice(y0, y1), slice(x0, x1)), np.asarray(soft, np.float32)))
    return masks


def _eye_openings(
    masks: list[tuple[tuple[slice, slice], NDArray[np.float32]] | None], shape: tuple[int, int]
) -> NDArray[np.float32]:
    """(H, W) float32, both eyes' masks (from _eye_masks) in one image: where
    _match_detail matches the eyes' detail to the target's eyes rather than to its
    skin."""
    openings = np.zeros(shape, np.float32)
    for part in masks:
        if part is not None:
            at, mask = part
            np.maximum(openings[at], mask, out=openings[at])
    return openings


def _fade_shut_eyes(
    weight: NDArray[np.float32],
    model: FaceModel,
    masks: list[tuple[tuple[slice, slice], NDArray[np.float32]] | None],
    target: NDArray[np.floating],
) -> None:
    """Give the output's eye openings (``masks``, from _eye_masks in ``weight``'s
    pixels) back to the target where its own mesh (``target``, any scale) reads them
    nearly closed, in place: the source's weight there falls to 0 as the target's
    opening closes (1 - eyeball.open_share).

    A closing opening fades the painted eyeball out; what showed instead was the
    source's own eye texels, its white and iris squeezed into the slit: white slivers
    and a dark block where the target's closed lids and lashes were (blinks in
    vid_p02 and vid_p04). The target's own mesh decides, not the output's: lids that
    the swap closes itself over a still's shut eyes that the mesh reads open (see
    close_lids) are drawn from the source, as the target's pixels there may not show
    its lashes where the closed lids are drawn."""
    for (loop, _, left, right), part in zip(_eye_layout(model), masks, strict=True):
        shut = 1.0 - eyeball.open_share(target[loop, :2], target[[left, right], :2])
        if part is not None and shut > 0.0:
            at, mask = part
            weight[at] *= np.float32(1.0) - np.float32(shut) * mask


@functools.lru_cache(maxsize=2)
def _lid_layout(
    model: FaceModel,
) -> tuple[NDArray[np.intp], NDArray[np.intp], NDArray[np.intp], NDArray[np.intp]]:
    """Both eye openings' lids: the upper lid's vertices; for each, the lower-lid
    vertex facing it (the one of the same rank along the eye; 7 a lid); the crease
    vertices above the upper lid (sharing a triangle with it); and for each of those
    the upper-lid vertex nearest along the eye (its place in the first array). In the
    canonical face, whose y points down."""
    canonical = model.canonical
    loops = {int(v) for loop, *_ in _eye_layout(model) for v in loop}
    uppers: list[int] = []
    lowers: list[int] = []
    creases: list[int] = []
    nearest: list[int] = []
    for loop, _, left, right in _eye_layout(model):
        ring = [int(v) for v in loop]
        i, j = sorted((ring.index(left), ring.index(right)))
        arcs = sorted(
            (ring[i + 1 : j], ring[j + 1 :] + ring[:i]),
            key=lambda arc: float(canonical[arc, 1].mean()),
        )
        upper, lower = (
            np.asarray(sorted(arc, key=lambda v: float(canonical[v, 0])), np.intp) for arc in arcs
        )
        rank = np.rint(np.linspace(0, len(lower) - 1, len(upper))).astype(np.intp)
        crease = np.asarray(
            sorted(
                v
                for v in set(model.around(upper).tolist()) - loops
                if canonical[v, 1] < canonical[upper, 1].mean()
            ),
            np.intp,
        )
        along = np.abs(canonical[crease, 0][:, None] - canonical[upper, 0][None, :])
        nearest.extend((len(uppers) + along.argmin(1)).tolist())
        uppers.extend(upper.tolist())
        lowers.extend(lower[rank].tolist())
        creases.extend(crease.tolist())
    as_array = functools.partial(np.asarray, dtype=np.intp)
    return as_array(uppers), as_array(lowers), as_array(creases), as_array(nearest)


def close_lids(
    points: NDArray[np.floating], model: FaceModel, amount: float
) -> NDArray[np.float32]:
    """``points`` (478+, 3) with both eyes' lids moved ``amount`` (0..1) of the way to
    where they meet when shut (LID_MEET up from the lower lid), the crease above
    following (LID_CREASE_FOLLOW); a copy."""
    out = np.array(points, np.float32)
    if amount <= 0.0:
        return out
    upper, lower, crease, nearest = _lid_layout(model)
    meet = out[lower] + LID_MEET * (out[upper] - out[lower])
    down = amount * (meet - out[upper])
    out[crease] += LID_CREASE_FOLLOW * down[nearest]
    out[upper] += down
    out[lower] += amount * (meet - out[lower])
    return out


def unfold_creases(
    shape: NDArray[np.floating], rest: NDArray[np.floating], model: FaceModel
) -> NDArray[np.float64] | None:
    """A tracked face's pose-space ``shape`` with the skin above each upper lid (the
    crease ring) moved down with the lid, LID_CREASE_FOLLOW of the way the lid went
    down from the face at rest (``rest``), where the mesh moved it less; None where
    no crease needs to move (the lids at rest, or raised).

    In a blink the mesh brings the upper lid down to the lower one but leaves the
    crease above nearly where it was (on vid_p04, 0.057 and 0.007 of the canonical
    face's units): the source's narrow lid strip between them, lashes at its edge,
    was stretched over the closed eye as a grey smear. A shut lid unfolds; as for a
    still's closed eyes (close_lids), the skin above now follows it, and the lid's
    edge comes down unstretched."""
    upper, _, crease, nearest = _lid_layout(model)
    cur = np.asarray(shape, np.float64)
    base = np.asarray(rest, np.float64)
    down = np.maximum(cur[upper, 1] - base[upper, 1], 0.0)
    lag = LID_CREASE_FOLLOW * down[nearest] - (cur[crease, 1] - base[crease, 1])
    if not (lag > 0.0).any():
        return None
    out = cur.copy()
    out[crease, 1] += np.maximum(lag, 0.0)
    return out


def _eye_fits(model: FaceModel, points: NDArray[np.floating]) -> list[bool]:
    """Per eye opening, whether the iris points of ``points`` (478+, >=2) fit an iris."""
    pts = np.asarray(points, np.float64)[:, :2]
    return [
        eyeball.plausible_iris(
            eyeball.iris_affine(pts[first : first + 5]),
            float(np.linalg.norm(pts[right] - pts[left])),
        )
        for _, first, left, right in _eye_layout(model)
    ]


def _source_eyes(
    model: FaceModel,
    image: Frame,
    landmarks: NDArray[np.floating],
    mirrored: NDArray[np.float32],
) -> tuple[eyeball.EyePatch | None, eyeball.EyePatch | None]:
    """SourceModel.eyes: each eyeball in iris coordinates, as photographed.

    An eye the photo saw badly (its texels mostly mirrored: a turned head's far eye)
    or whose iris does not fit takes the other eye's patch, mirrored left-right.
    """
    pts = np.asarray(landmarks, np.float64)[:, :2]
    holes = _uv_holes(model, mirrored.shape[0])
    patches: list[eyeball.EyePatch | None] = []
    far: list[bool] = []
    for (loop, first, left, right), fits, code in zip(
        _eye_layout(model), _eye_fits(model, pts), (HOLE_EYE_LEFT, HOLE_EYE_RIGHT), strict=True
    ):
        texels = holes == code
        patch = (
            eyeball.eye_patch(image, pts[loop], pts[first : first + 5], pts[[left, right]])
            if fits
            else None
        )
        patches.append(patch)
        far.append(float(mirrored[texels].mean()) > 0.5)
    out: list[eyeball.EyePatch | None] = []
    for k in (0, 1):
        own, other = patches[k], patches[1 - k]
        if other is not None and (own is None or (far[k] and not far[1 - k])):
            own = other.mirrored()
        out.append(own)
    return out[0], out[1]


def prepare_source(
    source_face: Face,
    *,
    model: FaceModel | None = None,
    uv_size: int = SwapOptions.uv_size,
    frame: Frame | None = None,
    log_advice: bool = True,
    face_occluder: Occluder | None = None,
) -> SourceModel:
    """Unwrap, complete and de-light a source face.

    Args:
        source_face: the face; its ``frame`` is used unless ``frame`` is given.
        model: the face model (the packaged one by default).
        uv_size: texture side in texels (a Swapper takes the source only at its
            own ``uv_size``; the default is both's).
        frame: the image the face was found in.
        log_advice: log the advice lines (below); False for a photo that only
            helps another one (see :func:`merge_sources`).
        face_occluder: a face occluder or parser (a model you bring): what it finds
            in front of the face hides what it covers, as a hand does.

    Returns:
        The :class:`SourceModel`.

    Each line of :func:`source_advice` is logged as a warning on the ``faceweave``
    logger (the command line prints them) and kept in ``SourceModel.advice``.

    Raises:
        InputError: ``source_face`` is not a Face, or it carries no image and none is
            given.
        UsageError: ``uv_size`` outside 32..2048.
    """
    if not isinstance(source_face, Face):
        raise InputError(f"expected a source Face, got {type(source_face).__name__}")
    check_face_points(source_face, "source")
    if not is_whole_number(uv_size):
        raise UsageError(f"uv_size must be a whole number, got {uv_size!r}")
    if not 32 <= uv_size <= MAX_WORK_SIDE:
        raise UsageError(f"uv_size must be from 32 to {MAX_WORK_SIDE}, got {uv_size}")
    model = model or load_face_model()
    image = frame if frame is not None else source_face.frame
    if image is None:
        raise InputError("the source face carries no image; pass frame=")
    # The eye and glasses checks, once: for the advice and for the texture below.
    seen_eyes = eyes_seen(source_face, image)
    glasses = _glasses_in_photo(source_face, image)
    verts = model.extend(source_face.landmarks_478)
    uvr = model.uv_raster(uv_size)
    covered = uvr.covered
    normals = vertex_normals(verts, model.render_triangles)
    skin = _skin_vertices(model)
    # What a face occluder finds in front of the face: hidden (below), and not fitted
    # as the face's light either (a green object had tinted the light, and with it
    # the skin taken from the other side where it was).
    # (On the photo, what covers its face; a choice of what to swap is the target's.)
    on_photo = None if face_occluder is None else face_occluder.for_source()
    occlusion = None if on_photo is None else occlusion_of(on_photo, image, source_face)
    fitted = skin
    if occlusion is not None:
        on_face = _texels_seen(occlusion, verts[None, skin, :2].astype(np.float32))[0]
        if int((on_face > 0.5).sum()) >= 20:
            fitted = skin[on_face > 0.5]
    light = _fit_light(image, verts, normals, fitted, source_face.size)
    # Per texel: source pixel position, depth, shading, how squarely it faces the camera,
    # and the same seen from above (the normal's up-down tilt left out).
    attrs = np.concatenate(
        [
            verts[:, :2],
            verts[:, 2:3],
            _clamped_shading(normals, light, normals, skin),
            -normals[:, 2:3],
            -normals[:, 2:3] / np.maximum(np.hypot(normals[:, 0:1], normals[:, 2:3]), 1e-6),
        ],
        axis=1,
    )
    per_texel = uvr.interpolate(attrs, model.render_triangles)
    map_xy = per_texel[..., 0:2]
    tex = cv2.remap(
        image, map_xy[..., 0], map_xy[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
    ).astype(np.float32)
    # Visibility: back-facing triangles, and texels hidden behind nearer geometry.
    visible_tri = _front_facing(verts[:, :2], model.render_triangles)
    facing = covered & visible_tri[np.maximum(uvr.triangle, 0)]
    wide_open = _mouth_opening(source_face.landmarks_478) > MOUTH_OPEN_WIDE
    occluded = _occluded(
        verts, _occluding_triangles(model, wide_open), map_xy, per_texel[..., 2], source_face.size
    )
    cos = np.clip(per_texel[..., 6], 0.0, 1.0)
    seen = cv2.GaussianBlur((facing & ~occluded).astype(np.float32), (5, 5), 0) * covered
    # A hand in front of the face hides what it covers, as the nose hides a turned
    # face's far cheek: the other side's texels, or the target's own skin, take it.
    held = _source_hands(image, source_face, map_xy)
    if held is not None:
        seen = seen * (1.0 - held)
    if occlusion is not None:
        # So does what a face occluder finds in front of it (a microphone, a cup).
        seen = seen * _texels_seen(occlusion, map_xy)
    advice = tuple(_advice(source_face, seen_eyes, _glasses_found(glasses), hands=held is not None))
    for line in advice if log_advice else ():
        advice_logger.warning("%s", line)
    shading = np.maximum(per_texel[..., 3:6], 1.0)
    albedo = tex / shading
    # Where this side was seen badly (hidden, or at a grazing angle), take the mirror texel,
    # weighted by how squarely the mirror side faced the camera.
    seen_m, cos_m = seen[:, ::-1], cos[:, ::-1]
    # Prefer the mirror texel only where it faced the camera markedly better (turned
    # heads, profiles); frontal faces keep their own, asymmetric, details.
    t = np.clip((cos_m * seen_m - cos * seen - 0.1) / 0.3, 0.0, 1.0)
    t = t * t * (3 - 2 * t)
    far_half: NDArray[np.float32] | None = None
    if abs(source_face.pose.yaw) > 35.0:
        # Strongly turned heads: the mesh underestimates the turn (a 90 degree profile
        # reads as ~55), so its far half maps background; take that whole half from the mirror.
        half = uv_size // 2
        left_cos = float(cos[:, :half][covered[:, :half]].mean())
        right_cos = float(cos[:, half:][covered[:, half:]].mean())
        u = np.linspace(0.0, 1.0, uv_size, dtype=np.float32)[None, :]
        side = (0.5 - u) if left_cos < right_cos else (u - 0.5)
        far_half = np.clip(side / 0.03, 0.0, 1.0) * (seen_m > 0.5)
        t = np.maximum(t, far_half)
    # Hair over part of the brows or forehead (a side-swept fringe): take the mirror
    # texel where it is much closer to skin.
    t = np.maximum(t, _fringe_mirror(model, uv_size, tex, covered) * (seen_m > 0.5))
    w_own = seen * (1.0 - t) + 1e-4 * seen
    w_mir = seen_m * t
    total = w_own + w_mir
    skin_mean = _mean_where(albedo, (seen > 0.9) & covered)
    filled = np.where(
        total[..., None] > 1e-3,
        (albedo * w_own[..., None] + albedo[:, ::-1] * w_mir[..., None])
        / np.maximum(total, 1e-3)[..., None],
        skin_mean,
    ).astype(np.float32)
    # How squarely the texel actually used (own or mirror) faced the source camera
    # sideways: grazing texels at the face's edge are smeared and mixed with hair or
    # background. Tilt up or down is left out: the nose's base faces down, edge-on, but
    # it is no silhouette, and leaving it to the target drew the target's nostrils as a
    # thin dark line with a light edge.
    side = np.clip(per_texel[..., 7], 0.0, 1.0)
    used_cos = (w_own * side + w_mir * side[:, ::-1]) / np.maximum(total, 1e-3)
    shown = total > 1e-3  # own or mirrored: not hidden on both sides
    valid = (np.clip((used_cos - 0.12) / 0.25, 0.0, 1.0) * shown).astype(np.float32)
    # The lower nose is no silhouette: its wings' sides face sideways and their
    # texels read as grazing (a mesh's noise tips them further), but what the photo
    # shows there is the nose, and leaving them to the target showed its own skin in
    # patches along the swapped nose's base, a jagged outline round the nostrils.
    valid = np.maximum(valid, _uv_nose_base(model, uv_size) * shown)
    mirrored = (w_mir / np.maximum(total, 1e-3)).astype(np.float32)
    # The frames' texels, found once: painted out, or kept and drawn (below).
    frame_texels = (
        _source_frame_texels(
            glasses,
            _uv_glasses_band_at(model, uv_size, GLASSES_SOURCE_REACH) > 0.5,
            map_xy,
            mirrored,
        )
        if glasses is not None and _glasses_found(glasses)
        else None
    )
    glasses_kept = False
    if frame_texels is not None:
        painted = _paint_out_source_glasses(filled, frame_texels, model)
        # (It hands back its input where it leaves the frames in the texture.)
        glasses_kept = painted is filled
        if not glasses_kept:
            # Painted out, they take their dark blocks with them (a hinge).
            grown = _with_dark_blocks(frame_texels, filled, model)
            again = _paint_out_source_glasses(filled, grown, model)
            if again is not filled:
                painted, frame_texels = again, grown
        filled = painted
    if wide_open:
        filled = _paint_out_stray_lip(filled, shading, model)
        filled, valid, shading = _mend_below_lips(filled, valid, shading, model)
        # Its lips are stretched thin: on a target's mouth they smeared into a bulge
        # (p27's on p26, p17's on every closed mouth). The target's lips stay.
        valid = valid * (1.0 - _uv_lips_band(model, uv_size))
    eyes = (
        _source_eyes(model, image, source_face.landmarks_478, mirrored)
        if seen_eyes >= 0.5
        else (None, None)
    )
    # Closed eyes or tinted lenses: the target's own eyes stay (they follow its lids).
    # All or nothing, as the advice says: half of each would show two pairs of eyes.
    # So behind glasses when no eyeball check takes either eye (a lens's glint read as
    # the white: p19's): the photo shows glass and glint there too.
    if seen_eyes < 0.5 or (eyes == (None, None) and _glasses_found(glasses)):
        valid = valid * (1.0 - _uv_hidden_eyes(model, uv_size))
    # Tinted or dark lenses: the target's own skin stays where they were, rather than
    # their tint around its eyes (whatever the swap's options: a lens is no part of
    # the source's face).
    lenses = _source_lenses(image, source_face, tex, model, map_xy, covered & (seen > 0.9))
    if lenses is not None:
        valid = valid * (1.0 - lenses)
    occluder, edge = _source_outliers(model, uv_size, filled, covered)
    kept_frames: NDArray[np.float32] | None = None
    if glasses_kept and frame_texels is not None:
        # Frames left in the texture are no occluder to give way to the target: its skin
        # through their thick dark rims made a pale ghost of them. They are drawn as
        # the glasses they are.
        frames = cv2.GaussianBlur(
            frame_texels.astype(np.float32), (0, 0), GLASSES_FRAMES_FEATHER * uv_size
        )
        kept_frames = np.clip(frames * 2.0, 0.0, 1.0)
        occluder = occluder * (1.0 - kept_frames)
    filled, shading = _paint_out_edge(filled, edge, model, shading)
    # After the outliers: hair at the temples stays an occluder (the target's).
    filled = _fill_grazing_band(filled, used_cos * shown, occluder, model)
    if abs(source_face.pose.yaw) > 35.0:
        occluder = np.maximum(occluder, _profile_midline(model, uv_size, filled, covered))
    shape = to_pose_space(source_face.landmarks_478, source_face.pose)
    confidence = valid * np.clip(used_cos, 0.0, 1.0) * (1.0 - 0.5 * mirrored) * (1.0 - occluder)
    if kept_frames is not None:
        # Frames show no skin: merged with a photo without glasses, that photo's texels
        # win there (see merge_sources), not a ghost of these glasses.
        confidence = confidence * (1.0 - kept_frames)
    # Under the photo's light. A strongly turned head's far half, taken from the
    # mirror, is under the light its mirror texels were seen in: the photo never showed
    # it, and its fitted shading there is that of a face turned away at the mesh's
    # underestimated angle (p15's profile drew a dark half on every target, its edge a
    # diagonal through the forehead and nose).
    if far_half is not None:
        shading = shading + far_half[..., None] * (shading[:, ::-1] - shading)
    # (Not on hair, lenses or kept frames: they are no skin whose colour was lost.)
    apart = np.maximum(occluder, 1.0 - valid)
    if kept_frames is not None:
        apart = np.maximum(apart, kept_frames)
    filled = _calm_shadow_chroma(filled, shading, model, apart)
    if not wide_open:
        # (A wide-open mouth's chin under the lips is its stretched lower lip and
        # the texels mended there: lifted, a pink smear.)
        filled = _lift_lip_shadow(filled, shading, model, apart)
    texture = (filled * shading).astype(np.float32)
    return SourceModel(
        albedo=filled,
        texture=texture,
        valid=valid,
        occluder=occluder,
        shape=shape,
        light=light,
        face=source_face,
        advice=advice,
        confidence=confidence.astype(np.float32),
        eyes=eyes,
        fine=_fine_texture(
            model, image, source_face.size, map_xy, tex, texture, valid * (1.0 - occluder)
        ),
        glasses=glasses_kept,
    )


def _texels_seen(occlusion: Occlusion, map_xy: NDArray[np.float32]) -> NDArray[np.float32]:
    """(S, S) how much of each texel (at ``map_xy``, its photo's pixels) the occluder saw
    as the face's: 1 outside what it looked at."""
    matrix = occlusion.matrix.astype(np.float32)
    at = map_xy @ matrix[:, :2].T + matrix[:, 2]
    seen = cv2.remap(
        occlusion.visible,
        np.ascontiguousarray(at[..., 0]),
        np.ascontiguousarray(at[..., 1]),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
        borderValue=1.0,
    )
    return np.asarray(seen, np.float32)


# Colour in a source's dark skin (see _calm_shadow_chroma): texels whose photo
# brightness is under SHADOW_DARK[0] of the skin's median (fully under
# SHADOW_DARK[1]) are no greener and no bluer than the skin by more than SHADOW_CAP
# (chromaticity, per unit of luma; measured after a blur of SHADOW_BLUR of the
# texture's side). Redder is left alone: a fold's or a nostril's shadow is redder
# than the skin around it.
SHADOW_DARK = (0.95, 0.6)
SHADOW_CAP = 0.06
SHADOW_BLUR = 0.006
# The two ways a shadow may go wrong, in BGR, each of them keeping luma (LUMA_BGR):
# towards red from green, and towards yellow from blue.
_REDDER = np.array([0.0, -0.299, 0.587], np.float32) / np.hypot(0.299, 0.587)
_YELLOWER = np.array([-0.886, 0.114, 0.114], np.float32) / np.sqrt(0.886**2 + 2 * 0.114**2)


def _calm_shadow_chroma(
    albedo: NDArray[np.float32],
    shading: NDArray[np.float32],
    model: FaceModel,
    apart: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``albedo`` with the colour of its skin's shadows kept from going green or blue:
    a photo's dark skin holds little colour, and what it holds may be its
    compression's and its light's (p03's coach, a stadium shot with the blue crushed
    in his shadows: olive patches around his mouth and chin came out green on every
    pale target). Dark skin texels greener or bluer than the skin by more than
    SHADOW_CAP move back by what is over it; luma, and so the features, stay.
    ``apart`` (0..1): how surely a texel is no skin of this photo's (hair, lenses,
    frames, texels it did not see); the skin's colour is measured where it is
    under 0.1, and texels over it move less, none from 0.5."""
    size = albedo.shape[0]
    skin = _uv_skin(model, size) & (apart < 0.5)
    measured = skin & (apart < 0.1)
    if int(measured.sum()) < 64:
        return albedo
    luma_w = color_ops.LUMA_BGR.astype(np.float32)
    luma = albedo @ luma_w
    photo = (albedo * shading) @ luma_w
    typical = float(np.median(photo[measured]))
    if typical <= 1.0:
        return albedo
    lo, hi = SHADOW_DARK
    dark = np.clip((lo - photo / typical) / (lo - hi), 0.0, 1.0)
    dark *= cv2.GaussianBlur(skin.astype(np.float32), (0, 0), 2.0 * SHADOW_BLUR * size) * skin
    dark *= np.clip(1.0 - 2.0 * apart, 0.0, 1.0)
    if not dark.any():
        return albedo
    chroma = albedo / np.maximum(luma, 1e-6)[..., None]
    mean = np.median(chroma[measured], axis=0).astype(np.float32)
    offset = _blur_within(chroma, skin.astype(np.float32), SHADOW_BLUR * size) - mean
    move = np.zeros_like(albedo)
    for axis in (_REDDER, _YELLOWER):
        short = np.maximum(-SHADOW_CAP - offset @ axis, 0.0) * dark
        move += (short * luma)[..., None] * axis
    return np.asarray(albedo + move, np.float32)


# A cast shadow under a source's lower lip (see _lift_lip_shadow): below the mouth
# (the strip along the lower lip's edge included), texels whose brightness (blurred
# over LIP_SHADOW_BLUR of the texture's side) is under LIP_SHADOW_DARK[0] of the
# chin's (fully under LIP_SHADOW_DARK[1]) are brought up to it, by at most
# LIP_SHADOW_GAIN, where the dark region is as smooth as skin: its fine texture
# (finer than LIP_SHADOW_GRAIN[0] of the side, averaged over LIP_SHADOW_GRAIN[1])
# under LIP_SHADOW_SMOOTH[0] times the cheeks' (none from LIP_SHADOW_SMOOTH[1]: a
# beard). The chin's brightness is that of the texels LIP_SHADOW_CHIN below the
# mouth (canonical units) or lower, at most the cheeks'; a beard over the whole chin
# darkens it too and is left alone.
LIP_SHADOW_DARK = (0.7, 0.45)
LIP_SHADOW_BLUR = 0.015
LIP_SHADOW_GRAIN = (0.004, 0.008)
LIP_SHADOW_SMOOTH = (1.5, 2.5)
LIP_SHADOW_CHIN = 0.6
LIP_SHADOW_GAIN = 4.0


def _lift_lip_shadow(
    albedo: NDArray[np.float32],
    shading: NDArray[np.float32],
    model: FaceModel,
    apart: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``albedo`` with the shadow a hard top light casts under the lower lip lifted to
    the chin's brightness: the light's, not the face's. Bob Dylan's (p26) came out as a
    dark blob under every target's lips, a goatee's size. ``apart`` as for
    :func:`_calm_shadow_chroma`. The lift raises the blurred albedo; the finer
    texture keeps its size. A region as textured as a beard, or a chin as dark below
    as under the lip, is no shadow of the lip's (see LIP_SHADOW_SMOOTH)."""
    size = albedo.shape[0]
    skin = _uv_skin(model, size) & (apart < 0.5)
    y = _uv_y(model, size)
    mouth_y = float(model.canonical[model.loops[2], 1].mean())
    cheeks = skin & (apart < 0.1) & _uv_cheeks(model, size)
    # (With the strip along the lower lip's edge, on triangles the lips' vertices
    # bound: the shadow starts there.)
    below = _mouth_below(model, size) & (apart < 0.5)
    low = below & skin & (y > mouth_y + LIP_SHADOW_CHIN)
    if int(cheeks.sum()) < 64 or int(low.sum()) < 20:
        return albedo
    luma = color_ops.LUMA_BGR.astype(np.float32)
    cheek = float(np.median((albedo[cheeks] * shading[cheeks]) @ luma))
    chin = min(cheek, float(np.median((albedo[low] * shading[low]) @ luma)))
    if chin <= 1.0:
        return albedo
    sigma = LIP_SHADOW_BLUR * size
    fine_sigma, mean_sigma = (v * size for v in LIP_SHADOW_GRAIN)
    # All of it on the crops around the region and the cheeks, with room for the
    # blurs (a full texture's took 8 ms of a source's preparation).
    reach = int(np.ceil(3.0 * sigma))

    def crop_of(mask: NDArray[np.bool_]) -> tuple[slice, slice]:
        x, y0, w, h = cv2.boundingRect(mask.astype(np.uint8))
        return (
            slice(max(0, y0 - reach), min(size, y0 + h + reach)),
            slice(max(0, x - reach), min(size, x + w + reach)),
        )

    def fine_of(at: tuple[slice, slice]) -> NDArray[np.float32]:
        photo = (albedo[at] * shading[at]) @ luma
        high = np.abs(photo - cv2.GaussianBlur(photo, (0, 0), fine_sigma))
        return np.asarray(cv2.GaussianBlur(high, (0, 0), mean_sigma), np.float32)

    at = crop_of(below)
    region = below[at]
    inside = region.astype(np.float32)
    photo = (albedo[at] * shading[at]) @ luma
    level = _blur_within(photo, inside, sigma)
    lo, hi = LIP_SHADOW_DARK
    dark = np.clip((lo - level / chin) / (lo - hi), 0.0, 1.0) * inside
    shadow = dark > 0.5
    if int(shadow.sum()) < 20:
        return albedo
    around = crop_of(cheeks)
    reference = float(np.median(fine_of(around)[cheeks[around]]))
    grain = float(np.median(fine_of(at)[shadow])) / max(reference, 1e-3)
    smooth = _ramp(-grain, (-LIP_SHADOW_SMOOTH[1], -LIP_SHADOW_SMOOTH[0]))
    if smooth <= 0.0:
        return albedo
    weight = cv2.GaussianBlur(dark * np.float32(smooth), (0, 0), 0.5 * sigma)
    gain = np.clip(chin / np.maximum(level, 1.0), 1.0, LIP_SHADOW_GAIN) ** weight
    # The gain lifts the blurred albedo, the finer rest keeps its size: multiplied in
    # full it drew the shadow's noise and compression (4x) as streaks like stubble.
    # (Blurred within the region: the lips' red is not spread onto the chin.)
    base = _blur_within(albedo[at], inside, mean_sigma)
    out = albedo.copy()
    out[at] += base * ((gain - 1.0) * inside)[..., None]
    return np.asarray(out, np.float32)


# The band a photo saw edge-on (see _fill_grazing_band): texels that faced its camera
# sideways at a cosine under GRAZING_BAND[1] (fully under GRAZING_BAND[0]) take the skin
# further in, where they are off it by more than GRAZING_OFF[0] of its brightness (fully
# by GRAZING_OFF[1]) in any channel.
GRAZING_BAND = (0.25, 0.5)
GRAZING_OFF = (0.08, 0.2)
# Texels whose fine texture (relative luma finer than a Gaussian of GRAZING_GRAIN[0]
# texels, its magnitude averaged over GRAZING_GRAIN[1]) is over GRAZING_TEXTURED[0]
# times the cheeks' (facing at least GRAZING_CHEEKS; at least GRAZING_GRAIN[2]) keep
# their own in part, over GRAZING_TEXTURED[1] times in full: a beard, sideburns.
GRAZING_GRAIN = (1.0, 3.0, 0.005)
GRAZING_CHEEKS = 0.7
GRAZING_TEXTURED = (1.5, 2.5)


def _fill_grazing_band(
    albedo: NDArray[np.float32],
    facing: NDArray[np.float32],
    occluder: NDArray[np.float32],
    model: FaceModel,
) -> NDArray[np.float32]:
    """``albedo`` with what the photo saw edge-on and is not skin painted with the skin
    further in.

    ``facing`` is how squarely each texel (its own or its mirror, as used) faced the
    photo's camera sideways; ``occluder`` (hair, see _source_outliers) is no skin to
    fill from. Towards the face's outline (the sides towards the ears,
    the jaw's flanks) a photo's skin darkens faster than the mesh's normals say, and
    mixes with sideburns, an ear's shadow, the background. A frontal target shows that
    band as thin as the photo did, at its own outline; a turned target's near side
    shows it wide, half blended with its own cheek by ``valid``: a grey stripe down the
    cheek (Obama's, p21's on the turned p20). Texels there that are as bright and
    coloured as the skin around them keep their own detail (and the cheek's contour)."""
    lo, hi = GRAZING_BAND
    keep = np.clip((facing - lo) / (hi - lo), 0.0, 1.0)
    keep = keep * keep * (3.0 - 2.0 * keep)
    size = albedo.shape[0]
    fill, _ = _skin_fill(albedo, _uv_skin(model, size) & (facing >= hi) & (occluder < 0.5))
    # (OpenCV's per-pixel channel reductions: numpy's over the last axis cost 10 ms.)
    third = np.full((1, 3), 1.0 / 3.0, np.float32)
    level = np.maximum(cv2.transform(fill, third), 1e-3)
    channels = cv2.split(cv2.absdiff(albedo, fill))
    off = cv2.max(cv2.max(channels[0], channels[1]), channels[2]) / level
    o0, o1 = GRAZING_OFF
    keep = 1.0 - (1.0 - keep) * np.clip((off - o0) / (o1 - o0), 0.0, 1.0)
    # A beard or sideburns are textured where shading is smooth: texels whose fine
    # texture is well above the cheeks' keep their own (p29's beard along the jaw).
    covered = model.uv_raster(size).covered.astype(np.float32)
    luma = cv2.transform(albedo, third) / level * covered

    # (Over covered texels only: the mesh's edge is no texture.)
    grain = np.abs(luma - _blur_within(luma, covered, GRAZING_GRAIN[0])) * covered
    grain = _blur_within(grain, covered, GRAZING_GRAIN[1])
    cheeks = _uv_skin(model, size) & (facing >= GRAZING_CHEEKS)
    reference = max(float(np.median(grain[cheeks])) if cheeks.any() else 0.0, GRAZING_GRAIN[2])
    r0, r1 = GRAZING_TEXTURED
    keep = np.maximum(keep, np.clip((grain / reference - r0) / (r1 - r0), 0.0, 1.0))
    keep = keep.astype(np.float32)
    return np.asarray(cv2.blendLinear(albedo, fill, keep, 1.0 - keep), np.float32)


# The fine texture (see _fine_texture): a texel counts as the photo's own where the final
# texture differs from the photo by under FINE_OWN_TOLERANCE grey levels in every channel
# (mirrored, filled and painted texels differ by more). Its band is the photo's detail
# finer than a Gaussian of FINE_SIGMA texels of the (S, S) texture: about what a face
# drawn at the processing size (224 px, half a pixel a texel) cannot show.
FINE_OWN_TOLERANCE = 6.0
FINE_SIGMA = 1.0
# A crop pixel spanning more than this many of the fine texture's texels draws from the
# texture's size instead.
FINE_MAX_SPAN = 1.4
# The fine detail fades in from DETAIL_RESTORE_SCALE to DETAIL_RESTORE_SCALE + FINE_FADE
# times the processing size (see fine_fade).
FINE_FADE = 0.3
# A photo whose fine detail is under this many grey levels (the median magnitude where
# it is kept) has none worth drawing.
FINE_MIN_DETAIL = 0.5


def _fine_texture(
    model: FaceModel,
    image: Frame,
    face_size: float,
    map_xy: NDArray[np.float32],
    photo: NDArray[np.float32],
    texture: NDArray[np.float32],
    usable: NDArray[np.float32],
) -> NDArray[np.float32]:
    """The photo's fine detail at twice the texture's resolution: (2S, 2S) float32 luma.

    A face drawn well above the processing size (see the end of Swapper._swap_into)
    takes its detail finer than that size from here: pores, lashes and the edges of
    brows and lips as the photo shows them. The photo's luma is sampled at (2S, 2S)
    texels (from a copy halved while the face is over twice that size, so it does not
    alias) and its Gaussian blur (FINE_SIGMA) taken out. The band is kept only where
    the texture is the photo's own: ``photo`` (the photo sampled at S) and the final
    ``texture`` agree, the texel is ``usable`` (seen, not covered by hair) and not
    inside the eye openings, whose eyeballs are drawn on their own. Elsewhere
    (mirrored, filled, painted) the detail would be another texel's or a painted-out
    occluder's.
    """
    size = texture.shape[0]
    fine_size = 2 * size
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    scale = 1.0
    while face_size * scale > 2.0 * fine_size and min(grey.shape) >= 64:
        grey = cv2.pyrDown(grey)
        scale *= 0.5
    # The UV-to-photo map at the fine size, in the (possibly halved) photo's pixels (x
    # and y apart: a two-channel float resize is OpenCV's slow path).
    map_x, map_y = (
        cv2.resize(
            np.ascontiguousarray(map_xy[..., axis]) * np.float32(scale),
            (fine_size, fine_size),
            interpolation=cv2.INTER_LINEAR,
        )
        for axis in (0, 1)
    )
    luma = cv2.remap(grey, map_x, map_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE).astype(
        np.float32
    )
    band = _high_pass(luma, 2.0 * FINE_SIGMA)
    # (OpenCV's per-channel maximum: numpy's max over the last axis took 5 ms.)
    difference = cv2.split(cv2.absdiff(texture, photo))
    agree = cv2.max(cv2.max(difference[0], difference[1]), difference[2]) < FINE_OWN_TOLERANCE
    own = (agree & ~_uv_eye_openings(model, size) & model.uv_raster(size).covered).astype(np.uint8)
    # Shrunk by the feather's reach: a texel next to one that is not its own is no one's.
    own = cv2.erode(own, np.ones((5, 5), np.uint8)).astype(np.float32)
    gate = cv2.GaussianBlur(own * np.clip(usable, 0.0, 1.0), (5, 5), 0)
    gate = cv2.resize(gate, (fine_size, fine_size), interpolation=cv2.INTER_LINEAR)
    return np.asarray(cv2.multiply(band, gate), np.float32)


def _high_pass(image: NDArray[np.float32], sigma: float) -> NDArray[np.float32]:
    """``image`` less its Gaussian blur of ``sigma`` pixels, the kernel reaching two
    sigmas each way (OpenCV's own reaches four: twice the time for the same band)."""
    reach = 2 * int(np.ceil(2.0 * sigma)) + 1
    blurred = cv2.GaussianBlur(image, (reach, reach), sigma)
    return np.asarray(cv2.subtract(image, blurred), np.float32)


def _has_detail(fine: NDArray[np.float32]) -> bool:
    """Whether a fine texture holds detail worth drawing: its median magnitude where
    it is kept, at every fourth texel, is FINE_MIN_DETAIL or more."""
    sample = fine[::4, ::4]
    kept = sample[sample != 0]
    return kept.size >= 16 and float(np.median(np.abs(kept))) >= FINE_MIN_DETAIL


# The face-locked grain (see _grain_texture): its bytes hold GRAIN_SCALE grey levels
# per unit of its median magnitude, around 128.
GRAIN_SCALE = 16.0


@functools.lru_cache(maxsize=2)
def _grain_texture(size: int) -> tuple[NDArray[np.uint8], NDArray[np.uint8]]:
    """A fixed grain in face (UV) space, at ``size`` texels and at half of it: white
    noise less its Gaussian blur (the fine texture's band), its median magnitude
    scaled to GRAIN_SCALE around 128.

    Where the source photo has less fine detail than the target frame (a small or
    soft photo on a sharp 1080p frame), the difference is made up with this grain.
    It is drawn through the face's UV map like the photo's detail, so it moves with
    the face as skin texture does, rather than standing still while the face moves
    under it; it is the same for every face (a fixed seed), so nothing about it
    changes from one run to the next.
    """
    rng = np.random.default_rng(20261130)
    noise = rng.standard_normal((size, size)).astype(np.float32)
    band = _high_pass(noise, 2.0 * FINE_SIGMA)
    levels = []
    for level in (band, cv2.pyrDown(band)):
        level = level * np.float32(GRAIN_SCALE / float(np.median(np.abs(level))))
        levels.append(np.asarray(cv2.add(level, 128.0, dtype=cv2.CV_8U), np.uint8))
    return levels[0], levels[1]


@functools.lru_cache(maxsize=8)
def _grain_plane(size: int, step: int = 1) -> NDArray[np.uint8]:
    """A fixed grain in face (UV) space, ``size`` texels a side, its grains ``step``
    texels apart (white noise on a grid ``step`` times coarser, drawn up to the
    texture's size), as bytes around 128 (GRAIN_SCALE grey levels per unit of its
    median magnitude), for the grain that _match_detail lays on a softer source.
    Fixed seed: the same for every face and every run."""
    rng = np.random.default_rng(20261207)
    coarse = max(8, size // step)
    noise = rng.standard_normal((coarse, coarse)).astype(np.float32)
    if coarse != size:
        noise = cv2.resize(noise, (size, size), interpolation=cv2.INTER_LINEAR)
    noise *= np.float32(GRAIN_SCALE / float(np.median(np.abs(noise))))
    return np.asarray(cv2.add(noise, 128.0, dtype=cv2.CV_8U), np.uint8)


# Several photos of one person: per texel, the photos are weighed by their confidence
# to this power, so the one that saw a texel best all but decides it (a plain average
# of a frontal photo and a turned one blurs the features they place a pixel apart).
MERGE_SHARPNESS = 4.0


def merge_sources(models: Sequence[SourceModel]) -> SourceModel:
    """One source from several photos of the same person.

    The first photo leads: its light, colours and face are kept. Every texel takes
    the photos that saw it best, and at the highest resolution (see
    :data:`MERGE_SHARPNESS`), so a frontal photo and a turned one give a face whose
    far side is its own rather than the near side's mirror image. The other photos'
    colours are first brought to the first's (a gain per channel, fitted on the skin
    both saw well), and the identity shape is the photos' mean, frontal ones
    weighing more.

    Raises:
        UsageError: no models, or models of different texture sizes.
        InputError: something that is not a prepared source (a Face: prepare it first
            with :func:`prepare_source`).
    """
    models = list(models)
    if not models:
        raise UsageError("give at least one source photo")
    for m in models:
        if not isinstance(m, SourceModel):
            raise InputError(
                f"merge_sources takes prepared sources (prepare_source(face)), "
                f"got {type(m).__name__}"
            )
    if len({m.albedo.shape for m in models}) != 1:
        raise UsageError("the prepared sources were built for different uv_sizes")
    if len(models) == 1:
        return models[0]
    lead = models[0]
    confidences = [
        m.valid * (1.0 - m.occluder) if m.confidence is None else m.confidence for m in models
    ]
    albedos = [lead.albedo]
    for model, confidence in zip(models[1:], confidences[1:], strict=True):
        # White balance and exposure: a gain per channel, from the skin both photos
        # saw well. (A full colour match would also copy the lead's contrast, and
        # with it a soft lead's lack of detail.)
        both = (confidences[0] > 0.5) & (confidence > 0.5)
        if int(both.sum()) >= 256:
            gain = lead.albedo[both].mean(0) / np.maximum(model.albedo[both].mean(0), 1e-6)
            albedos.append((model.albedo * np.clip(gain, 0.5, 2.0)).astype(np.float32))
        else:
            albedos.append(model.albedo)
    # A texel from a small face holds less detail: weigh by the face's size as well.
    largest = max(m.face.size for m in models)
    weights = [
        np.power(c * min(1.0, m.face.size / largest), MERGE_SHARPNESS) + 1e-6
        for m, c in zip(models, confidences, strict=True)
    ]
    weights[0] = weights[0] + 1e-4  # where no photo saw a texel, the lead's fill stays
    total = np.sum(weights, axis=0)

    def mix(values: list[NDArray[np.float32]]) -> NDArray[np.float32]:
        out = np.zeros(values[0].shape, np.float64)
        for weight, value in zip(weights, values, strict=True):
            out += (weight[..., None] if value.ndim == 3 else weight) * value
        return (out / (total[..., None] if out.ndim == 3 else total)).astype(np.float32)

    albedo = mix(albedos)
    # The lead's own light on the merged albedo (its shading: texture over albedo).
    shading = lead.texture / np.maximum(lead.albedo, 1e-3)
    # Each eyeball from the first photo that has one (not mixed: two irises a pixel
    # apart would blur; its colours are brought to the target's white when drawn).
    eyes = tuple(next((e for m in models if (e := m.eyes[k]) is not None), None) for k in (0, 1))
    turned = np.array([max(np.cos(np.radians(m.face.pose.yaw)), 0.1) for m in models])
    shape = np.tensordot(turned / turned.sum(), np.stack([m.shape for m in models]), axes=1)
    return replace(
        lead,
        albedo=albedo,
        texture=np.clip(albedo * shading, 0.0, 255.0).astype(np.float32),
        valid=mix([m.valid for m in models]),
        occluder=mix([m.occluder for m in models]),
        shape=shape,
        confidence=np.max(confidences, axis=0).astype(np.float32),
        eyes=(eyes[0], eyes[1]),
        fine=_share_of_fine(lead.fine, weights[0] / total),
    )


def _share_of_fine(
    fine: NDArray[np.float32] | None, share: NDArray[np.floating]
) -> NDArray[np.float32] | None:
    """The lead photo's fine detail where the merged texture is mostly its own (its
    ``share`` of each texel's weight): one photo's detail over another's texel would
    be a ghost of the first's features."""
    if fine is None:
        return None
    size = fine.shape[0]
    share = np.clip((share - 0.5) * 2.0, 0.0, 1.0).astype(np.float32)
    return (fine * cv2.resize(share, (size, size))).astype(np.float32)


# Hair over the forehead (see _source_outliers). The photo's hair colour is sampled
# in a band along the mesh's top and side edges HAIR_RIM of the texture's side wide,
# from texels over HAIR_SAMPLE_Z robust z from the cheeks' skin, when they are at least
# HAIR_SAMPLE_SHARE of that band. A fringe is hair over more than FRINGE_COVER of the
# forehead below that band (above the brows); its occluders are then grown by
# FRINGE_GROW of the texture's side before the blur. Without that the blur's ramp lay on
# the fringe's lower strands and the shadow they cast, and a fair fringe (the
# astronaut's) left a brown band across every target's forehead.
HAIR_RIM = 0.06
HAIR_SAMPLE_Z = 3.0
HAIR_SAMPLE_SHARE = 0.15
FRINGE_COVER = 0.3
FRINGE_GROW = 0.023
# A fringe of fine strands whose colour is near the skin's (p19's grey fringe over her
# dim, wrinkled forehead: 1.6-1.8 robust z from her cheeks, where a forehead without
# hair reads up to 2.3) is found by its texture (see _fringe_strands): over the
# forehead, the lightness's gradient energy (its structure tensor, averaged over
# STRAND_SIGMA of the texture's side) against the cheeks' median passes STRAND_ENERGY[0]
# (fully at STRAND_ENERGY[1]), and its sideways share (upright strands: a forehead's
# wrinkles run across it, their gradient is up-down) passes STRAND_UPRIGHT[0] (fully
# at [1]). Without it her strands went onto every target's forehead as pale streaks.
# Where that covers over STRAND_FRINGE of the forehead above the brows' band (its
# mean), all of that band is the fringe's: the strands' middle, brighter and less
# upright where they part, stayed the source's (p19: 0.29; the profile p15, its far
# half mirrored from hair and background, 0.43; p18's single lock 0.17; 0.08 or less
# on the rest of the quality set, p23's red fringe among them).
STRAND_SIGMA = 0.015
STRAND_ENERGY = (1.2, 2.0)
STRAND_UPRIGHT = (0.68, 0.8)
STRAND_FRINGE = 0.2
# What is not face at the lower face's edge (see _edge_outliers): texels within
# EDGE_DEPTH of the texture's side from the mesh's edge, joined to it, whose robust z
# from the cheeks' colour passes EDGE_Z[0] (fully at EDGE_Z[1]) or whose brightness
# falls under EDGE_DARK[0] of the skin's median (fully at EDGE_DARK[1]).
EDGE_DEPTH = 0.15
EDGE_Z = (2.0, 3.0)
EDGE_DARK = (0.6, 0.4)
# Of those, the texels within EDGE_RIM of the texture's side from the edge are left to
# the target (occluders); the rest are painted over with the source's skin.
EDGE_RIM = 0.02
# They must lie on one side only: texels whose mirror, give or take EDGE_MIRROR_SLACK of
# the texture's side, is one too belong to the face (p29's, p24's and p25's beards
# along the jaw were painted out).
EDGE_MIRROR_SLACK = 0.025
# ...unless they do not reach the chin (|x| under EDGE_CHIN[0], EDGE_CHIN[1] below the
# mouth in the canonical face) over EDGE_CHIN[2] of it: a beard does, hair hanging down
# both cheeks does not.
EDGE_CHIN = (0.2, 0.4, 0.02)
# Such hair is strands: between the dark ones the skin shows, tinted by thinner ones,
# nearer the skin's colour than EDGE_Z[0]. In a region of hair (not a beard) the gaps
# between the strands found are closed, and texels over HAIR_STRAND_Z[0] robust z from
# the cheeks count too (fully at HAIR_STRAND_Z[1]): p23's cheeks' sides kept streaks
# of her hair, a grey smudge on every pale target's cheek.
HAIR_STRAND_Z = (1.0, 2.0)
# Below the mouth, a clear outlier on skin (z over CHIN_SEED_Z, on CHIN_SEED_SHARE of
# the texture at least: the bright part of a microphone held to the chin) is followed
# into the texels connected to it that are off the skin's colour by less (over
# CHIN_GROW_Z) and darker than it: the rest of the object. When that reaches inside
# the face (CHIN_INSIDE: CHIN_INSIDE[1] of its texels, and CHIN_INSIDE[2] of the
# texture's at least, lie further than CHIN_INSIDE[0] of its side from its edge) it is
# painted over, with a rim of CHIN_RIM, like the edge's outliers: with the source's
# skin around it, its outer EDGE_RIM left to the target. Before, only the microphone's
# highlight was an occluder: its grey body went onto every target's chin, and where the
# highlight had been, the target's own skin showed as a patch of another colour.
CHIN_SEED_Z = 5.0
CHIN_SEED_SHARE = 0.001
CHIN_GROW_Z = 2.5
# A share of the object, not a count of texels: p10's microphone reached in by 861
# texels (35% of it) in its photo and by 542 (27%) in the photo mirrored, where the
# mesh sat a little lower on the chin; a count of 0.005 of the texture (737 texels at
# 384) painted it out in one and carried its grey body onto every target's chin in
# the other. A collar or a scarf along the chin's edge reaches in little or not at all
# (on the development photos at most 13% of what is joined to a seed: the jersey
# collar under p33's lowered chin).
CHIN_INSIDE = (0.08, 0.2, 0.001)
CHIN_RIM = 0.01


# The temples' hair check (see _source_outliers) leaves out the texels within this
# share of an eye's width of an eye opening: the lashes and shadow at an eye's outer
# corner, past the eye's outer x, counted as hair there, and the target's own eye
# corner showed through the source's (p23's winged eyeliner at the corners of every
# swap onto her).
TEMPLE_EYE_CLEAR = 0.35


@functools.lru_cache(maxsize=4)
def _uv_near_eyes(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """(S, S) texels within TEMPLE_EYE_CLEAR of an eye's width of an eye opening
    (read-only, shared)."""
    eyes = _uv_eye_openings(model, size).astype(np.uint8)
    k = int(round(2 * TEMPLE_EYE_CLEAR * _uv_eye_width(model, size))) | 1
    near = cv2.dilate(eyes, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))) > 0
    near.setflags(write=False)
    return np.asarray(near)


def _source_outliers(
    model: FaceModel, size: int, albedo: NDArray[np.float32], covered: NDArray[np.bool_]
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """What in the source's texture is not its face, found by colour: ``(occluders,
    edge)``.

    ``occluders`` (0..1, blurred) keep the target's pixels: hair over the forehead
    (bangs), and the outer EDGE_RIM of what lies at the lower face's edge. ``edge``
    is all of the latter (_edge_outliers), and an object held in front of the chin
    (_chin_object): further in, it is painted over with the source's skin
    (_paint_out_edge) rather than left to the target, whose own skin showed through
    as a patch of another colour.

    Skin statistics come from the cheeks and nose (below the eyes); forehead and
    temple texels (not those at the eyes' corners: TEMPLE_EYE_CLEAR) far from them in
    Lab (robust z-score) are marked as occluders, and
    so are those nearer the photo's own hair colour than its skin's (a fair fringe
    under a warm light lies 2-4 z from the skin, where the first test only partly
    counts it). A fringe's occluders reach down to the brows' top and are grown so
    that the target's forehead takes over on skin (see FRINGE_GROW). The hair colour
    at the forehead's edge (not the temples', where a beard may reach) also tells
    long hair down both cheeks from a beard at the lower edge (_edge_outliers).
    """
    texture = _albedo_bytes(albedo)
    lab = _texture_lab(texture)  # once, for the skin's colour and the hair's
    z = _skin_z(model, size, texture, covered, lab=lab)
    if z is None:
        return np.zeros((size, size), np.float32), np.zeros((size, size), np.float32)
    y, x = _uv_y(model, size), _uv_x(model, size)
    brow_y = float(model.canonical[model.regions["left_eyebrow"], 1].min())
    mouth_y = float(model.canonical[model.loops[2], 1].mean())
    eye_outer_x = _eye_outer_x(model)
    # Not the eyes' outer corners: lashes and an eye's corner shadow lie just past the
    # eye's outer x and are no hair (see TEMPLE_EYE_CLEAR).
    temples = (np.abs(x) > eye_outer_x) & (y < mouth_y) & ~_uv_near_eyes(model, size)
    region = covered & ((y < brow_y - 0.05) | temples)
    # Elsewhere on skin (not eyes, brows, lips) only clear outliers count: background
    # at a profile's silhouette, a microphone, glasses frames.
    skin = _uv_skin(model, size)
    inner = skin & ~region
    ramp = np.clip((z - 2.0) / 2.0, 0.0, 1.0) * region + np.clip((z - 4.0) / 2.0, 0.0, 1.0) * inner
    depth = _uv_depth(model, size)
    held = _chin_object(z, lab[..., 0], inner & _mouth_below(model, size), depth)
    if held is not None:
        ramp[held] = 0.0
    below_eyes = skin & (y > float(model.canonical[model.loops[0], 1].max()))
    rim = region & (depth < HAIR_RIM * size)
    hair_z = _hair_z(lab, rim & (z > HAIR_SAMPLE_Z), rim)
    # The hair colour above the forehead alone, for the lower edge: sideburns in the
    # temples' rim are as likely a beard's.
    hairline = rim & ~temples
    top_hair_z = _hair_z(lab, hairline & (z > HAIR_SAMPLE_Z), hairline)
    hair = None
    if top_hair_z is not None:
        chin = below_eyes & (np.abs(x) < EDGE_CHIN[0]) & (y > mouth_y + EDGE_CHIN[1])
        hair = (chin, top_hair_z < z)
    edge = _edge_outliers(texture, z, below_eyes, depth, skin, hair)
    if held is not None:
        edge = np.maximum(edge, held)
    ramp = np.maximum(ramp, edge * (depth < EDGE_RIM * size))
    if hair_z is not None:
        nearer_hair = np.clip((z - hair_z) / 2.0, 0.0, 1.0) * np.clip(z - 1.0, 0.0, 1.0)
        ramp = np.maximum(ramp, nearer_hair * region)
    # Strands near the skin's colour, by their texture (see STRAND_ENERGY); over
    # STRAND_FRINGE of the forehead, the whole of it is a fringe's.
    top = region & ~temples & (y < brow_y - 0.1)
    strands = _fringe_strands(model, size, lab[..., 0], covered, top)
    if top.any() and float(strands[top].mean()) > STRAND_FRINGE:
        strands = top.astype(np.float32)
    ramp = np.maximum(ramp, strands)
    ramp = cv2.morphologyEx(ramp.astype(np.float32), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    forehead = region & ~temples & (depth >= HAIR_RIM * size) & (y < brow_y - 0.1)
    if forehead.any() and float((ramp[forehead] > 0.5).mean()) > FRINGE_COVER:
        # A fringe hangs down to the brows: the strip between the region and the brows'
        # top counts too (its strands left brown smudges above every target's brows).
        strip = covered & ~region & (y < brow_y)
        low = np.clip((z - 2.0) / 2.0, 0.0, 1.0)
        if hair_z is not None:
            low = np.maximum(low, nearer_hair)
        low = (low * strip).astype(np.float32)
        low = cv2.morphologyEx(low, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
        ramp = np.maximum(ramp, low)
        region = region | strip
        k = int(round(FRINGE_GROW * size)) | 1
        ramp = np.where(region, cv2.dilate(ramp, np.ones((k, k), np.uint8)), ramp)
    return np.asarray(
        cv2.GaussianBlur(ramp.astype(np.float32), (0, 0), size * 0.01), np.float32
    ), edge


def _fringe_strands(
    model: FaceModel,
    size: int,
    lightness: NDArray[np.float32],
    covered: NDArray[np.bool_],
    forehead: NDArray[np.bool_],
) -> NDArray[np.float32]:
    """How surely each ``forehead`` texel shows upright strands of hair (0..1, see
    STRAND_ENERGY): textured like hair, not like the cheeks' skin, and upright, not
    along a wrinkle. ``lightness``: the texture's Lab L. Gradients are taken only
    inside the mesh (its edge against the black outside is no texture) and averaged
    over the texels that have them."""
    inside = cv2.erode(covered.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(np.float32)
    gx = cv2.Sobel(lightness, cv2.CV_32F, 1, 0, ksize=3) * inside
    gy = cv2.Sobel(lightness, cv2.CV_32F, 0, 1, ksize=3) * inside
    sigma = STRAND_SIGMA * size
    weight = np.maximum(cv2.GaussianBlur(inside, (0, 0), sigma), 1e-3)
    across = cv2.GaussianBlur(gx * gx, (0, 0), sigma) / weight
    along = cv2.GaussianBlur(gy * gy, (0, 0), sigma) / weight
    energy = across + along
    cheeks = _uv_cheeks(model, size) & (inside > 0)
    if int(cheeks.sum()) < 50:
        return np.zeros((size, size), np.float32)
    ratio = np.sqrt(energy / max(float(np.median(energy[cheeks])), 1e-6))
    upright = across / np.maximum(energy, 1e-6)
    return np.asarray(
        _ramps(ratio, STRAND_ENERGY) * _ramps(upright, STRAND_UPRIGHT) * forehead, np.float32
    )


def _chin_object(
    z: NDArray[np.float32],
    lightness: NDArray[np.float32],
    chin: NDArray[np.bool_],
    depth: NDArray[np.float32],
) -> NDArray[np.bool_] | None:
    """What is held in front of the ``chin`` texels (see CHIN_SEED_Z), or None: the
    texels over CHIN_GROW_Z and darker than the chin's skin (``lightness``: Lab L)
    connected to those over CHIN_SEED_Z, with them, and with a rim of CHIN_RIM.

    Only an object: its seeds cover CHIN_SEED_SHARE of the texture at least (not a
    glint), and a share of its body reaches inside the face (CHIN_INSIDE; ``depth``:
    texels from the texture's edge), not a collar or a scarf along the chin's edge,
    which the edge check deals with (_edge_outliers)."""
    size = z.shape[0]
    seeds = chin & (z > CHIN_SEED_Z)
    plain = chin & (z < CHIN_GROW_Z)
    if int(seeds.sum()) < CHIN_SEED_SHARE * size * size or not plain.any():
        return None
    body = chin & (z > CHIN_GROW_Z) & (lightness < float(np.median(lightness[plain])))
    held = _joined(body, seeds)
    reach, part, least = CHIN_INSIDE
    inside = int((held & (depth > reach * size)).sum())
    if inside < max(part * int(held.sum()), least * size * size):
        return None
    # With its rim, the object's edge blurred into the skin (a grey ring round it).
    k = 2 * int(round(CHIN_RIM * size)) + 1
    grown = cv2.dilate(held.astype(np.uint8), np.ones((k, k), np.uint8)) > 0
    return np.asarray(grown & chin)


def _paint_out_edge(
    albedo: NDArray[np.float32],
    edge: NDArray[np.float32],
    model: FaceModel,
    shading: NDArray[np.float32],
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """The lower face's edge outliers (``edge``, from _source_outliers) painted over
    with the mean of the skin around them (_skin_fill): what lies inside the face's
    outline (the shadow under Grace Hopper's ear) becomes the source's skin; the
    outer EDGE_RIM stays an occluder, the target's. Returns ``(albedo, shading)``,
    the (S, S, 3) shading painted alike with the shading around: the source's light is
    fitted to its mesh's skin, hair and all, and it read long hair down both cheeks
    (p23's) as a dark orange light on the face's sides, which the texture under that
    light (albedo times shading) kept however the albedo was painted: a grey patch
    on every pale target's cheek."""
    hole = edge > 0.3
    if not hole.any():
        return albedo, shading
    size = albedo.shape[0]
    grown = cv2.dilate(hole.astype(np.uint8), np.ones((5, 5), np.uint8))
    alpha = cv2.GaussianBlur(grown.astype(np.float32), (0, 0), size * 0.006)
    skin = _uv_skin(model, size)
    painted = _painted_with_skin(albedo, skin, grown > 0, alpha)
    lit = _painted_with_skin(shading, skin, grown > 0, alpha)
    return painted, lit


def _painted_with_skin(
    albedo: NDArray[np.float32],
    skin: NDArray[np.bool_],
    hole: NDArray[np.bool_],
    alpha: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``albedo`` painted over by ``alpha`` (0..1 per texel) with the mean of the
    ``skin`` texels around each texel outside ``hole`` (_skin_fill)."""
    fill, _ = _skin_fill(albedo, skin & ~hole)
    return np.asarray(albedo + alpha[..., None] * (fill - albedo), np.float32)


def _edge_outliers(
    texture: NDArray[np.float32],
    z: NDArray[np.float32],
    lower: NDArray[np.bool_],
    depth: NDArray[np.float32],
    skin: NDArray[np.bool_],
    hair: tuple[NDArray[np.bool_], NDArray[np.bool_]] | None = None,
) -> NDArray[np.float32]:
    """How surely each texel of the lower face's sides and chin shows something other
    than the face, reached from the mesh's edge on one side: background, a collar, the
    shadow under an ear.

    The mesh's outline often lies a little outside the face's real one. Texels there
    squarely face the camera, so nothing else leaves them out, and every target took
    them: Grace Hopper's collar and the shadow under her ear gave a dark smudge on
    every target's cheek, p21's bright neck a light line along the jaw. A texel
    counts when it is off the cheeks' colour (EDGE_Z, robust z) or much darker than
    the skin (EDGE_DARK, share of its median brightness), within EDGE_DEPTH of the
    texture's side from the edge (``depth``, in texels), joined to the edge by such
    texels (a mole or a wrinkle inside the face is not), and on one side of the face
    only (EDGE_MIRROR_SLACK): a beard along the jaw is dark and off the skin's colour
    on both sides. So is anything in the middle: p10's microphone stays. With
    ``hair``, a region on both sides counts all the same when most of it is nearer
    the hair's colour than the skin's and it does not reach the chin (EDGE_CHIN):
    long hair down both cheeks (p23's) is no beard. In such a region of hair the
    gaps between its strands count too, and so do texels only a little off the
    skin's colour (HAIR_STRAND_Z): the skin seen through thinner strands.

    Args:
        texture: (S, S, 3) the albedo in 0..255 (see _albedo_bytes).
        z: (S, S) each texel's distance from the cheeks' colour (_skin_z).
        lower: where to look (skin below the eyes).
        depth: distance from the covered region's edge, in texels.
        skin: the skin texels the brightness median is taken over.
        hair: ``(chin, hairlike)``, (S, S) masks: the chin's texels, and those
            nearer the photo's hair colour than its skin's; None when the photo
            shows no hair colour.
    """
    size = z.shape[0]
    rel = texture.mean(-1) / max(float(np.median(texture[skin].mean(-1))), 1.0)
    (z0, z1), (d0, d1) = EDGE_Z, EDGE_DARK
    near = lower & (depth < EDGE_DEPTH * size)
    candidate = near & ((z > z0) | (rel < d0))
    joined = _joined(candidate, candidate & (depth < 3.0))
    # One side only: what the mirror side shows too is the face's (a beard along the
    # jaw, which the colour and darkness tests take for a collar; a goatee). Texel by
    # texel: a whole region that is partly mirrored can be a collar joined to the
    # jaw's shading (Grace Hopper's).
    k = int(round(EDGE_MIRROR_SLACK * size)) | 1
    grown = cv2.dilate(joined.astype(np.uint8), np.ones((k, k), np.uint8)) > 0
    mirrored = grown[:, ::-1]
    if hair is not None:
        # Hair hanging down both cheeks (p23's) is no beard: a region mostly nearer the
        # photo's hair colour than its skin's that does not reach the chin goes too.
        # Regions closer than the mirror's slack count as one (a grey chin can break
        # a beard up: p29's).
        chin, hairlike = hair
        n, regions = cv2.connectedComponents(grown.astype(np.uint8), connectivity=8)
        at_chin = np.bincount(regions[joined & chin], minlength=n)
        share = np.bincount(regions[joined & hairlike], minlength=n) / np.maximum(
            np.bincount(regions[joined], minlength=n), 1
        )
        beard = (at_chin >= max(1.0, EDGE_CHIN[2] * float(chin.sum()))) | (share < 0.5)
        mirrored &= beard[regions]
        hanging = ~beard[regions] & (regions > 0) & near
    else:
        hanging = np.zeros_like(joined)
    joined &= ~mirrored
    how = np.maximum(
        np.clip((z - z0) / (z1 - z0), 0.0, 1.0), np.clip((d0 - rel) / (d0 - d1), 0.0, 1.0)
    )
    edge = joined * how
    if hanging.any():
        closed = (
            cv2.morphologyEx(
                (joined & hanging).astype(np.uint8), cv2.MORPH_CLOSE, np.ones((k, k), np.uint8)
            )
            > 0
        )
        loose = np.clip((z - HAIR_STRAND_Z[0]) / (HAIR_STRAND_Z[1] - HAIR_STRAND_Z[0]), 0.0, 1.0)
        edge = np.maximum(edge, np.maximum(closed & hanging, hanging * loose))
    return np.asarray(edge, np.float32)


def _hair_z(
    lab: NDArray[np.float32], samples: NDArray[np.bool_], band: NDArray[np.bool_]
) -> NDArray[np.float32] | None:
    """Each texel's distance from the hair colour of the ``samples`` texels (robust z in
    the texture's Lab ``lab``, as _skin_z); None when they are under HAIR_SAMPLE_SHARE
    of ``band`` or too few."""
    if int(samples.sum()) < max(50, HAIR_SAMPLE_SHARE * int(band.sum())):
        return None
    return np.asarray(_robust_z(lab, lab[samples]), np.float32)


@functools.lru_cache(maxsize=4)
def _uv_y(model: FaceModel, size: int) -> NDArray[np.float32]:
    """The canonical face's height (y, down) at each texel (read-only, shared: a source's
    preparation asks for it several times)."""
    return _uv_canonical(model, size, 1)


@functools.lru_cache(maxsize=4)
def _uv_x(model: FaceModel, size: int) -> NDArray[np.float32]:
    """The canonical face's sideways position (x) at each texel (read-only, shared)."""
    return _uv_canonical(model, size, 0)


def _uv_canonical(model: FaceModel, size: int, axis: int) -> NDArray[np.float32]:
    """One axis of the canonical face interpolated at each texel, read-only."""
    raster = model.uv_raster(size)
    values = model.canonical_extended[:, axis : axis + 1]
    out = raster.interpolate(values, model.render_triangles)[..., 0]
    out.setflags(write=False)
    return out


def _albedo_bytes(albedo: NDArray[np.float32]) -> NDArray[np.float32]:
    """An albedo (any scale) brought to 0..255 by its maximum, for :func:`_skin_z`."""
    return np.asarray(albedo * (255.0 / max(float(albedo.max()), 1.0)), np.float32)


def _skin_z(
    model: FaceModel,
    size: int,
    texture: NDArray[np.float32],
    covered: NDArray[np.bool_],
    lightness_weight: float = 1.0,
    lab: NDArray[np.float32] | None = None,
) -> NDArray[np.float32] | None:
    """Each texel's distance from the cheeks' skin colour (robust z-score in Lab, its
    lightness part scaled by ``lightness_weight``); None when too little cheek shows.
    ``texture`` is BGR in 0..255; ``lab`` its _texture_lab, when the caller has it."""
    lab = _texture_lab(texture) if lab is None else lab
    cheeks = covered & _uv_cheeks(model, size)
    if cheeks.sum() < 50:
        return None
    return np.asarray(_robust_z(lab, lab[cheeks], lightness_weight) * covered, np.float32)


def _texture_lab(texture: NDArray[np.float32]) -> NDArray[np.float32]:
    """A BGR texture in 0..255 as OpenCV's float Lab."""
    lab = cv2.cvtColor(np.clip(texture / 255.0, 0.0, 1.0).astype(np.float32), cv2.COLOR_BGR2Lab)
    return np.asarray(lab, np.float32)


def _robust_z(
    lab: NDArray[np.float32], samples: NDArray[np.float32], lightness_weight: float = 1.0
) -> NDArray[np.float64]:
    """Each pixel's distance from the colour of ``samples`` ((N, 3) Lab): per channel its
    difference from their median over their median absolute deviation (scaled to a
    standard deviation, with a floor), the lightness part scaled by ``lightness_weight``."""
    # Per channel along contiguous rows: numpy's median is several times faster so
    # than down the columns of (N, 3), and gives the same values.
    rows = np.ascontiguousarray(np.asarray(samples).T)
    med = np.median(rows, axis=1)
    mad = np.median(np.abs(rows - med[:, None]), axis=1) * 1.4826 + np.array([2.0, 1.5, 1.5])
    mad[0] /= lightness_weight
    return np.asarray(np.sqrt((((lab - med) / mad) ** 2).sum(-1)), np.float64)


# Fringe mirroring (see _fringe_mirror): a texel above the eyes is taken from its mirror
# where its distance from the cheeks' skin colour (robust z, lightness at half weight)
# is over FRINGE_Z and exceeds its mirror's by FRINGE_MARGIN or more (fully by twice).
FRINGE_Z = 3.0
FRINGE_MARGIN = 1.5


def _fringe_mirror(
    model: FaceModel, size: int, texture: NDArray[np.float32], covered: NDArray[np.bool_]
) -> NDArray[np.float32]:
    """How much each texel above the eyes should come from its mirror because hair
    covers it and not its mirror: a side-swept fringe over one brow. Measured on the
    texture as photographed (its shading counts at half weight); brows and hair that
    cover both sides alike are left as they are (the forehead occluders take those)."""
    z = _skin_z(model, size, texture, covered, lightness_weight=0.5)
    if z is None:
        return np.zeros((size, size), np.float32)
    upper = covered & (_uv_y(model, size) < float(model.canonical[model.loops[0], 1].min()))
    mirror = np.clip((z - z[:, ::-1] - FRINGE_MARGIN) / FRINGE_MARGIN, 0.0, 1.0)
    mirror *= (z > FRINGE_Z) & upper
    return np.asarray(cv2.GaussianBlur(mirror.astype(np.float32), (0, 0), size * 0.006), np.float32)


# A strongly turned source's midline above the nose tip (see _profile_midline): texels
# within this UV distance of it, and this far (robust z) from the cheeks' skin colour.
MIDLINE_HALF_WIDTH = 0.03
MIDLINE_Z = 2.5


def _profile_midline(
    model: FaceModel, size: int, albedo: NDArray[np.float32], covered: NDArray[np.bool_]
) -> NDArray[np.float32]:
    """Occluders on a strongly turned source's midline. Its forehead, brow ridge and
    nose bridge are the photo's silhouette (the mesh reads a 90 degree profile as about
    55): texels there that are not skin-coloured are background seen past the profile,
    partly mixed in. Thin, they escape the forehead check (its opening removes lines);
    on p15 they drew a dark notch between the brows of every target."""
    z = _skin_z(model, size, _albedo_bytes(albedo), covered)
    if z is None:
        return np.zeros((size, size), np.float32)
    u = np.linspace(0.0, 1.0, size, dtype=np.float32)[None, :]
    nose_y = float(model.canonical[model.regions["nose"], 1].max())
    strip = (np.abs(u - 0.5) < MIDLINE_HALF_WIDTH) & (_uv_y(model, size) < nose_y) & covered
    mid = cv2.dilate((strip & (z > MIDLINE_Z)).astype(np.float32), np.ones((3, 3), np.uint8))
    return np.asarray(cv2.GaussianBlur(mid, (0, 0), size * 0.004), np.float32)


def _mean_where(image: NDArray[np.float32], mask: NDArray[np.bool_]) -> NDArray[np.float32]:
    if mask.sum() < 16:
        return np.full(3, 128.0, np.float32)
    return np.asarray(image[mask].mean(0), np.float32)


def _front_facing(points: NDArray[np.float32], triangles: NDArray[np.int32]) -> NDArray[np.bool_]:
    a, b, c = points[triangles[:, 0]], points[triangles[:, 1]], points[triangles[:, 2]]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    return np.asarray(area > 0)


# A mouth open wider than this (inner lips apart over mouth width, landmarks 13-14 over
# 61-291): the lips are no occluders (see _occluding_triangles). A scream reads 0.77, a
# laugh 0.52, open-mouthed speech and grins 0.35 and under on the development photos.
MOUTH_OPEN_WIDE = 0.45


def _mouth_opening(points: NDArray[np.floating]) -> float:
    """How far the lips are apart, over the mouth's width (2D landmarks)."""
    p = np.asarray(points, np.float64)[:, :2]
    return float(np.linalg.norm(p[13] - p[14]) / max(float(np.linalg.norm(p[61] - p[291])), 1e-6))


@functools.lru_cache(maxsize=8)
def _occluding_triangles(model: FaceModel, mouth_wide_open: bool) -> NDArray[np.int32]:
    """The render triangles that may hide part of the face from the camera (see
    _occluded): all of them, but with the mouth wide open not the mouth opening's fan
    nor the lips and the triangles around them. A dropped jaw rolls the lower lip over
    the chin in the image while the mesh puts the chin well behind it: p27's scream
    had the skin below her lower lip read as hidden (80% of it), and every target took
    its own there, a pale patch with a jagged edge under the source's lips."""
    triangles = model.render_triangles
    if not mouth_wide_open:
        return triangles
    near_lips = np.zeros(len(model.canonical_extended), bool)
    near_lips[model.regions["lips"]] = True
    near_lips[triangles[near_lips[triangles].any(axis=1)].ravel()] = True  # one ring out
    keep = (model.hole_of_triangle != HOLE_MOUTH) & ~near_lips[triangles].any(axis=1)
    occluding = np.ascontiguousarray(triangles[keep])
    occluding.setflags(write=False)
    return occluding


# The outer lip contour of MediaPipe's mesh, in order around the mouth.
_LOWER_OUTER_LIP = (61, 146, 91, 181, 84, 17, 314, 405, 321, 375)  # corner to corner
_UPPER_OUTER_LIP = (291, 409, 270, 269, 267, 0, 37, 39, 40, 185)  # and back
OUTER_LIPS = _LOWER_OUTER_LIP + _UPPER_OUTER_LIP
# A stray lip (see _paint_out_stray_lip): texels below the mouth whose redness (Lab a*)
# lies over STRAY_LIP_SHARE of the way from the cheeks' to the lips', when the two
# differ by STRAY_LIP_GAP or more.
STRAY_LIP_SHARE = 0.6
STRAY_LIP_GAP = 6.0
# A wide-open mouth's lips give way to the target's, fading out over LIPS_BAND_GROW of
# the texture's side around them. Below them, texels the source did not show (valid
# under MEND_VALID) further than MEND_DEPTH of the side from the mesh's edge are
# painted with the skin around them (see _mend_below_lips).
LIPS_BAND_GROW = 0.01
MEND_VALID = 0.9
MEND_DEPTH = 0.05
# Their shading is mended MEND_SHADING_GROW of the side further round them.
MEND_SHADING_GROW = 0.015


@functools.lru_cache(maxsize=4)
def _uv_lips(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """(S, S) texels inside the outer lip contour, the mouth opening left out."""
    poly = np.zeros((size, size), np.uint8)
    cv2.fillPoly(poly, [np.round(model.uv[list(OUTER_LIPS)] * (size - 1)).astype(np.int32)], 1)
    lips = (poly > 0) & (_uv_holes(model, size) == HOLE_NONE)
    lips.setflags(write=False)
    return lips


def _paint_out_stray_lip(
    albedo: NDArray[np.float32], shading: NDArray[np.float32], model: FaceModel
) -> NDArray[np.float32]:
    """A wide-open mouth's lower lip, where it lies outside the mesh's lips, replaced
    by the chin's skin.

    A scream stretches the lower lip down over the chin, and MediaPipe's lip contour
    does not follow it all the way: p27's lower lip reached a third of the way down
    the chin's triangles, and every target got a large pink lower lip. Below the
    mouth and within its width, texels nearer the lips' redness than the cheeks'
    (STRAY_LIP_SHARE; measured under the photo's own light, ``albedo * shading``) and
    joined to the lips take the mean of the skin around them (_skin_fill). Lips no
    redder than the skin (STRAY_LIP_GAP) are left alone.
    """
    size = albedo.shape[0]
    lips = _uv_lips(model, size)
    skin = _uv_skin(model, size) & ~lips
    cheeks = skin & _uv_cheeks(model, size)
    if cheeks.sum() < 50 or lips.sum() < 50:
        return albedo
    redness = _texture_lab(np.clip(albedo * shading, 0.0, 255.0))[..., 1]
    a_skin, a_lips = float(np.median(redness[cheeks])), float(np.median(redness[lips]))
    if a_lips - a_skin < STRAY_LIP_GAP:
        return albedo
    red = _mouth_below(model, size) & ((redness - a_skin) > STRAY_LIP_SHARE * (a_lips - a_skin))
    stray = _joined(red, lips) & red
    if not stray.any():
        return albedo
    hole = cv2.dilate(stray.astype(np.uint8), np.ones((3, 3), np.uint8))
    alpha = cv2.GaussianBlur(hole.astype(np.float32), (5, 5), 0) * ~lips  # lips untouched
    return _painted_with_skin(albedo, skin, hole > 0, alpha)


# The lower nose: the wings, the columella and the nostrils between them, and the
# skin just under them (canonical centroid between NOSE_BASE_Y, within NOSE_BASE_X of
# the midline, in front of NOSE_BASE_Z).
NOSE_BASE_Y = (0.0, 0.32)
NOSE_BASE_X = 0.45
NOSE_BASE_Z = -0.3


@functools.lru_cache(maxsize=4)
def _uv_nose_base(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) float32 1 on the lower nose's texels (NOSE_BASE_Y), feathered over
    0.4% of the texture (read-only, shared)."""
    centre = model.canonical_extended[model.render_triangles].mean(axis=1)
    lower = (centre[:, 1] > NOSE_BASE_Y[0]) & (centre[:, 1] < NOSE_BASE_Y[1])
    lower &= (np.abs(centre[:, 0]) < NOSE_BASE_X) & (centre[:, 2] < NOSE_BASE_Z)
    raster = model.uv_raster(size)
    inside = raster.covered & lower[np.maximum(raster.triangle, 0)]
    soft = cv2.GaussianBlur(inside.astype(np.float32), (0, 0), max(0.004 * size, 0.5))
    soft.setflags(write=False)
    return np.asarray(soft)


@functools.lru_cache(maxsize=4)
def _uv_cheeks(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """(S, S) the cheeks' band, from a little below the eyes to a little above the
    mouth, where a face's skin colour and texture are measured (read-only, shared)."""
    y = _uv_y(model, size)
    eye_y = float(model.canonical[model.loops[0], 1].max())
    mouth_y = float(model.canonical[model.loops[2], 1].mean())
    band = (y > eye_y + 0.15) & (y < mouth_y - 0.1)
    band.setflags(write=False)
    return np.asarray(band)


# A smiling photo's folds (nose wing to mouth corner and on down beside the chin) and
# the cheeks' bulge over them are its expression, not its person: drawn on a target
# that does not smile, they made it grin (Angelina's and Obama's onto vid_p04). The
# fold lines (each side's vertices in order), the band's half width around them and
# the ring round the lips' outline it may take too (of the texture's side).
SMILE_FOLD_LINES = (
    (129, 203, 206, 216, 212, 214, 210),
    (358, 423, 426, 436, 432, 434, 430),
)
SMILE_FOLD_WIDTH = 0.065
SMILE_LIP_RING = 0.05
# In that band the texture is flattened (see _flatten_folds) to the skin's light and
# shade broader than SMILE_BROAD (a Gaussian, of the texture's side) plus its pores:
# its detail finer than SMILE_PORES texels, clipped to SMILE_PORE_CLIP times the
# band's typical pore, and along the folds' thin dark lines (those a closing of
# SMILE_LINE of the side fills) taken from the closed texture. The lines are filled
# in full, the rest of the way (the bulge beside the folds) is gone by
# SMILE_BROAD_SHARE only: it carries much of what dlib reads as the person (over 100
# swaps of five smiling sources, d(out, src) 0.558 untouched, 0.596 flattened in
# full, 0.566 / 0.572 with the lines filled and 0.3 / 0.5 of the rest; retrieval
# 0.65, 0.56, 0.67, 0.61), and the lines read as the grin.
SMILE_BROAD = 0.08
SMILE_PORES = 1.5
SMILE_PORE_CLIP = 2.0
SMILE_LINE = 0.025
SMILE_BROAD_SHARE = 0.4
# How much of the flattened texture a swap takes: none while the target's mouth is
# nearly as wide as the source's (a smile onto a smile), all from SMILE_WIDTH_GAP[1]
# narrower (mouth width over the eyes' outer corners' distance, see mouth_width:
# neutral mouths measure 0.45-0.63 in the development set, smiles 0.70-0.87), and
# only for a source whose mouth is a smile's: none up to SMILE_SOURCE_WIDTH[0], all
# from [1]. A wide mouth at rest is the person's, and so are its folds (Grace
# Hopper's, 0.58, onto vid_p05's narrower one had been flattened).
SMILE_WIDTH_GAP = (0.04, 0.14)
SMILE_SOURCE_WIDTH = (0.6, 0.68)
# The other way round, in a still image (see Swapper._lay_smile_folds): a target that
# smiles wider than the source by SMILE_WIDTH_GAP, its mouth a smile's by
# SMILE_SOURCE_WIDTH, gives the swapped face its own folds in the smile's band. They
# are the log-luma band between SMILE_FOLD_SIGMAS (texels of a creases.CREASE_SIZE
# face space): a fold's line and its soft side, wider than an expression's creases.
# The band of the crease size alone drew a thin line where the target's cheek folds.
# They are laid at SMILE_FOLD_SHARE of their depth: dlib reads a deep smile's folds as
# the person (Obama's and Biden's onto a girl's face: d(out, src) up to 0.15 more; over
# the quality benchmark's 420 swaps, retrieval 255 -> 247 pairs in full, 250 at 0.6).
SMILE_FOLD_SIGMAS = (0.8, 5.0)
SMILE_FOLD_SHARE = 0.6
SMILE_FOLD_FEATHER = 0.02


@functools.lru_cache(maxsize=4)
def _uv_smile_folds(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) weights in [0, 1] of the band along the smile's folds (read-only,
    shared): on the skin, and on the ring between the lips' outline and the skin
    (the mesh's lip triangles reach past the red of the lips; a smile's corners
    crease there)."""
    zone = np.zeros((size, size), np.float32)
    width = max(1, int(round(2 * SMILE_FOLD_WIDTH * size)))
    for line in SMILE_FOLD_LINES:
        points = np.round(model.uv[list(line)] * (size - 1)).astype(np.int32)
        cv2.polylines(zone, [points], False, 1.0, thickness=width, lineType=cv2.LINE_AA)
    zone = cv2.GaussianBlur(zone, (0, 0), SMILE_FOLD_WIDTH * size * 0.5)
    uv = model.uv * (size - 1)
    lips = np.zeros((size, size), np.uint8)
    cv2.fillPoly(lips, [np.round(uv[list(OUTER_LIPS)]).astype(np.int32)], 1)

    def grown(share: float) -> NDArray[np.uint8]:
        k = 2 * max(1, int(round(share * size))) + 1
        return cv2.dilate(lips, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))

    # (The lips' outline: the mesh's skin triangles reach into their red.)
    off_lips = grown(0.004) == 0
    ring = (grown(SMILE_LIP_RING) > 0) & model.uv_raster(size).covered
    allowed = (_uv_skin(model, size) | ring) & off_lips
    zone = (zone * allowed).astype(np.float32)
    zone.setflags(write=False)
    return zone


@functools.lru_cache(maxsize=4)
def _uv_fold_cheeks(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) weights in [0, 1] where a still target's smile lends its folds (see
    _lay_smile_folds, read-only, shared): the smile's band from its fold lines out
    over the cheeks, not between them (fading in over SMILE_FOLD_FEATHER of the
    texture's side) and not on the nose's wings and tip (creases.crease_zone).
    Between the fold lines lie a moustache and a goatee: a bearded target's came
    onto the source's lips."""
    uv = model.uv * (size - 1)
    left, right = (np.asarray(line) for line in SMILE_FOLD_LINES)
    between = np.zeros((size, size), np.float32)
    ring = np.concatenate([uv[left], uv[right][::-1]])
    cv2.fillPoly(between, [np.round(ring).astype(np.int32)], 1.0, lineType=cv2.LINE_AA)
    k = 2 * max(1, int(round(SMILE_FOLD_FEATHER * size))) + 1
    between = cv2.erode(between, np.ones((k, k), np.uint8))
    between = cv2.GaussianBlur(between, (0, 0), SMILE_FOLD_FEATHER * size * 0.5)
    zone = _uv_smile_folds(model, size) * creases.crease_zone(model, size) * (1.0 - between)
    zone = np.asarray(zone, np.float32)
    zone.setflags(write=False)
    return zone


def mouth_width(points: NDArray[np.floating]) -> float:
    """A face's mouth width over the distance of its eyes' outer corners, from its
    pose-normalised mesh (how wide it smiles, on a face's own scale)."""
    eyes = float(np.linalg.norm(points[33, :2] - points[263, :2]))
    return float(np.linalg.norm(points[61, :2] - points[291, :2])) / max(eyes, 1e-6)


def _flatten_folds(
    texture: NDArray[np.float32], zone: NDArray[np.float32], skin: NDArray[np.floating]
) -> NDArray[np.float32]:
    """``texture`` (S, S, 3) with its smile's folds flattened in ``zone`` (0..1, see
    SMILE_BROAD): the skin's (``skin``, 0..1) broad colour, from a blur normalised by
    the skin's own (no lips or background in it), with its pores. In log colour per
    channel, so that a fold's own hue goes with its shade (a luma change alone left
    a red line where a fold had been)."""
    size = texture.shape[0]
    x, y, w, h = cv2.boundingRect(cv2.compare(zone, 0.0, cv2.CMP_GT))
    if w == 0 or h == 0:
        return texture
    # The broad light and shade (over the whole texture: the blur reaches far past the
    # band).
    log_all = np.log(np.maximum(texture, 0.0) + 1.0)
    skin_all = np.ascontiguousarray(skin, np.float32)
    broad_all = _blur_within_coarse(log_all, skin_all, 4.0 * SMILE_BROAD * max(1, size // 4))
    # The rest within the band's box (with room for the closing and the finest blur).
    pad = 2 * int(round(SMILE_LINE * size)) + 4
    y0, y1 = max(0, y - pad), min(size, y + h + pad)
    x0, x1 = max(0, x - pad), min(size, x + w + pad)
    log, broad = log_all[y0:y1, x0:x1], broad_all[y0:y1, x0:x1]
    m = skin_all[y0:y1, x0:x1]

    # Pores: the finest detail, clipped to the skin's typical pore. Along a fold's thin
    # dark line (what a closing fills that stays after a blur: a pore's dot spreads
    # out, a line does not) from the closed texture, which has no line.
    def finest(image: NDArray[np.float32]) -> NDArray[np.float32]:
        return np.asarray(image - cv2.GaussianBlur(image, (0, 0), SMILE_PORES), np.float32)

    pores = finest(log)
    on = (m > 0.5) & (zone[y0:y1, x0:x1] > 0.1)
    limit = float(np.median(np.abs(pores.mean(axis=2)[on]))) if on.sum() >= 16 else 0.0
    closed, along = log, np.zeros(log.shape[:2] + (1,), np.float32)
    if limit > 0:
        closed, lines = _fold_lines(log, on, limit, SMILE_PORES, size)
        along = lines[..., None]
    pores = np.clip(
        pores + along * (finest(closed) - pores), -SMILE_PORE_CLIP * limit, SMILE_PORE_CLIP * limit
    )
    z = zone[y0:y1, x0:x1, None]
    # The change: the folds' lines filled in full, then the rest of the way to the
    # flattened skin (the bulge beside them) by SMILE_BROAD_SHARE.
    unlined = log + along * (closed - log)
    change = unlined - log + SMILE_BROAD_SHARE * (broad + pores - unlined)
    out = texture.copy()
    # (Where the zone is 0 the texels stay exactly as they were.)
    np.copyto(out[y0:y1, x0:x1], np.exp(log + z * change) - 1.0, where=z > 0)
    return out


def _fold_kernel(side: int) -> int:
    """The (odd) closing's width that fills a smile's fold lines in a texture ``side``
    texels wide (SMILE_LINE of it)."""
    return 2 * max(1, int(round(SMILE_LINE * side / 2))) + 1


def _fold_lines(
    image: NDArray[np.float32], on: NDArray[np.bool_], limit: float, sigma: float, side: int
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """Where a smile's folds draw thin dark lines in ``image`` (H, W) or (H, W, 3), a
    part of a texture ``side`` texels wide: ``(closed, along)``, the image closed over
    SMILE_LINE of that side (which fills a line and lifts a pore's pit) and 0..1 how
    surely each texel lies on a line.

    A line is what the closing lifts (the channels' mean) that stays after a blur of
    ``sigma`` (a pore's dot spreads out, a line does not), above its median on the
    ``on`` texels (every pore's pit is lifted too), by ``limit`` (none) to 3 x
    ``limit`` (surely): the zone's typical pore."""
    k = _fold_kernel(side)
    closed = cv2.morphologyEx(
        image, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    )
    lift = closed - image
    line = cv2.GaussianBlur(lift.mean(axis=2) if lift.ndim == 3 else lift, (0, 0), sigma)
    along = _ramps(line - float(np.median(line[on])), (limit, 3.0 * limit + 1e-6))
    return np.asarray(closed, np.float32), along


def _flatten_fine_folds(
    fine: NDArray[np.float32], zone: NDArray[np.float32]
) -> NDArray[np.float32]:
    """The photo's fine detail (see _fine_texture) with the smile's folds' thin lines
    taken out in ``zone`` (the same size): along a line (see _flatten_folds) it goes,
    and the rest is clipped to the zone's typical pore."""
    k = _fold_kernel(fine.shape[0])
    x, y, w, h = cv2.boundingRect(cv2.compare(zone, 0.0, cv2.CMP_GT))
    at = (slice(max(0, y - k), y + h + k), slice(max(0, x - k), x + w + k))
    detail, weight = fine[at], zone[at]
    on = (weight > 0.1) & (detail != 0)
    if int(on.sum()) < 16:
        return fine
    limit = float(np.median(np.abs(detail[on])))
    _, along = _fold_lines(detail, on, limit, 2.0 * SMILE_PORES, fine.shape[0])
    clipped = np.clip(detail, -SMILE_PORE_CLIP * limit, SMILE_PORE_CLIP * limit) * (1.0 - along)
    out = fine.copy()
    out[at] = detail + weight * (clipped - detail)
    return out


def _blur_within(
    image: NDArray[np.float32], mask: NDArray[np.float32], sigma: float
) -> NDArray[np.float32]:
    """``image`` (H, W) or (H, W, C) blurred by a Gaussian of ``sigma`` over the texels
    of ``mask`` (H, W; 0 or 1) alone: each texel takes the mean of the masked ones
    around it, not diluted by what lies outside."""
    weight = np.maximum(cv2.GaussianBlur(mask, (0, 0), sigma), 1e-3)
    if image.ndim == 3:
        blurred = cv2.GaussianBlur(image * mask[..., None], (0, 0), sigma)
        return np.asarray(blurred / weight[..., None], np.float32)
    return np.asarray(cv2.GaussianBlur(image * mask, (0, 0), sigma) / weight, np.float32)


def _blur_within_coarse(
    image: NDArray[np.float32], mask: NDArray[np.float32], sigma: float
) -> NDArray[np.float32]:
    """:func:`_blur_within` worked out at a quarter of the size, for a blur wide enough
    to be smooth there: ``image`` (H, W) or (H, W, C) blurred by a Gaussian of
    ``sigma`` pixels over the texels of ``mask`` (H, W; 0 or 1) alone (under 8 pixels
    a side, at full size). (An area filter by a whole factor is a fast path in OpenCV:
    the last few rows and columns past a multiple of 4 take the edge's value.)"""
    h, w = image.shape[:2]
    if min(h, w) < 8:
        return _blur_within(image, mask, sigma)
    hk, wk = h - h % 4, w - w % 4
    if (hk, wk) != (h, w):
        image, mask = image[:hk, :wk], mask[:hk, :wk]
    small = (wk // 4, hk // 4)
    k = max(0.5, sigma / 4.0)
    channels = 1 if image.ndim == 2 else image.shape[2]
    masked = cv2.multiply(image, mask if channels == 1 else cv2.merge([mask] * channels))
    weight = cv2.GaussianBlur(cv2.resize(mask, small, interpolation=cv2.INTER_AREA), (0, 0), k)
    inverse = 1.0 / np.maximum(weight, np.float32(1e-3))
    blurred = cv2.multiply(
        cv2.GaussianBlur(cv2.resize(masked, small, interpolation=cv2.INTER_AREA), (0, 0), k),
        inverse if channels == 1 else cv2.merge([inverse] * channels),
    )
    out = cv2.resize(blurred, (wk, hk), interpolation=cv2.INTER_LINEAR)
    if (hk, wk) != (h, w):
        out = cv2.copyMakeBorder(out, 0, h - hk, 0, w - wk, cv2.BORDER_REPLICATE)
    return np.asarray(out, np.float32)


@functools.lru_cache(maxsize=4)
def _mouth_below(model: FaceModel, size: int) -> NDArray[np.bool_]:
    """(S, S) texels below the mouth and within its width (x 1.15), outside the lips
    and the mesh's holes: where a scream pulls the lower lip down (read-only, shared:
    a wide-open mouth's preparation asks for it twice)."""
    y, x = _uv_y(model, size), _uv_x(model, size)
    half_width = float(np.abs(model.canonical[list(OUTER_LIPS), 0]).max())
    mouth_y = float(model.canonical[model.loops[2], 1].mean())
    below = model.uv_raster(size).covered & ~_uv_lips(model, size)
    below &= (y > mouth_y) & (np.abs(x) < 1.15 * half_width)
    below &= _uv_holes(model, size) == HOLE_NONE
    below.setflags(write=False)
    return np.asarray(below)


def _mend_below_lips(
    albedo: NDArray[np.float32],
    valid: NDArray[np.float32],
    shading: NDArray[np.float32],
    model: FaceModel,
) -> tuple[NDArray[np.float32], NDArray[np.float32], NDArray[np.float32]]:
    """A wide-open mouth's unseen texels under the lips, painted with the skin around
    them, lit as the skin around them, and counted as seen.

    A scream's stretched lower lip folds its triangles away from the camera, and the
    skin mapped behind them reads as unseen: the target showed through there, a pale
    V under every swap's lower lip (p27's). Away from the mesh's edge (MEND_DEPTH)
    such texels (valid under MEND_VALID) below the mouth take the mean of the skin
    around them (_skin_fill) and become valid. Their shading, fitted to the folded
    triangles' normals (facing down, away from the light), is the mean of the shading
    around them too: kept, it drew the mended skin as a dark V, a goatee's shape, under
    every swap's lower lip. Returns ``(albedo, valid, shading)``.
    """
    size = albedo.shape[0]
    covered = model.uv_raster(size).covered
    depth = _uv_depth(model, size)
    hole = _mouth_below(model, size) & (valid < MEND_VALID) & (depth > MEND_DEPTH * size)
    if not hole.any():
        return albedo, valid, shading
    grown = cv2.dilate(hole.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    alpha = cv2.GaussianBlur(grown.astype(np.float32), (5, 5), 0) * covered
    skin = _uv_skin(model, size) & ~_uv_lips(model, size)
    painted = _painted_with_skin(albedo, skin, grown, alpha)
    # The shading, smooth, over a wider rim (MEND_SHADING_GROW): the folds' dark edge
    # reaches a little past the unseen texels and drew their outline.
    k = 2 * int(round(MEND_SHADING_GROW * size)) + 1
    wider = cv2.dilate(hole.astype(np.uint8), cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k)))
    rim = cv2.GaussianBlur(wider.astype(np.float32), (0, 0), MEND_SHADING_GROW * size / 2.0)
    lit = _painted_with_skin(shading, skin, wider > 0, np.maximum(rim * covered, alpha))
    return painted, np.maximum(valid, alpha).astype(np.float32), lit


@functools.lru_cache(maxsize=4)
def _uv_lips_band(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) 1 on the lips, fading out over LIPS_BAND_GROW of the side around them
    (read-only)."""
    lips = _uv_lips(model, size)
    reach = LIPS_BAND_GROW * size
    k = 2 * int(round(reach)) + 1
    ellipse = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    grown = cv2.dilate(lips.astype(np.uint8), ellipse).astype(np.float32)
    band = np.maximum(cv2.GaussianBlur(grown, (0, 0), max(reach / 2.0, 0.5)), lips)
    band = np.asarray(band, np.float32)
    band.setflags(write=False)
    return band


def _occluded(
    verts: NDArray[np.float32],
    triangles: NDArray[np.int32],
    map_xy: NDArray[np.float32],
    texel_depth: NDArray[np.float32],
    face_size: float,
) -> NDArray[np.bool_]:
    """Texels whose surface point lies behind the nearest surface at its pixel (z-buffer test)."""
    res = 128.0
    scale = res / max(face_size * 1.3, 1.0)
    origin = verts[:, :2].min(0) - 2.0
    pts = (verts[:, :2] - origin) * scale
    hw = (int(np.ceil(pts[:, 1].max())) + 2, int(np.ceil(pts[:, 0].max())) + 2)
    raster = rasterize(pts, triangles, hw, depth=verts[:, 2], cull_back_faces=True)
    zbuf = raster.interpolate(verts[:, 2:3], triangles, fill=np.inf)[..., 0]
    mx = ((map_xy[..., 0] - origin[0]) * scale).astype(np.float32)
    my = ((map_xy[..., 1] - origin[1]) * scale).astype(np.float32)
    near = cv2.remap(
        zbuf, mx, my, cv2.INTER_NEAREST, borderMode=cv2.BORDER_CONSTANT, borderValue=np.inf
    )
    tolerance = 0.03 * face_size
    return np.asarray(texel_depth > near + tolerance)


# What a swapper is built from: a face, a prepared source, or several of one person.
SourcePhotos = Face | SourceModel | Sequence[Face | SourceModel]

# Two photos given as one person whose dlib identity distance is over this get a warning.
SAME_PERSON_DISTANCE = 0.6


def _same_person_advice(faces: list[Face]) -> list[str]:
    """A line for each photo merged as one person that looks like another person
    than the first (dlib identity distance); none for faces without the identity
    model."""
    if not all(face.has_embedding for face in faces):
        return []
    lead = faces[0].embedding
    lines = []
    for number, face in enumerate(faces[1:], start=2):
        distance = float(np.linalg.norm(face.embedding - lead))
        if distance > SAME_PERSON_DISTANCE:
            lines.append(
                f"source photo {number} looks like another person than the first (identity "
                f"distance {distance:.2f}, over {SAME_PERSON_DISTANCE:.2f}): the photos are "
                "merged anyway"
            )
    return lines


_Swapping = TypeVar("_Swapping", bound="FaceSwapping")


def checked_occlusions(occlusions: object, count: int) -> list[Occlusion | None]:
    """``occlusions`` as a list of ``count`` Occlusions (or None for a face without
    one), or an InputError."""
    if isinstance(occlusions, (str, bytes)) or not isinstance(occlusions, Sequence):
        raise InputError(
            "occlusions are a list of Occlusion (or None), one per face, got "
            f"{type(occlusions).__name__}"
        )
    given = list(occlusions)
    if len(given) != count:
        raise InputError(f"{len(given)} occlusions given for {count} faces")
    for item in given:
        if item is not None and not isinstance(item, Occlusion):
            raise InputError(f"an occlusion is an Occlusion or None, got {type(item).__name__}")
    return given


def checked_hands(hands: object) -> list[Hand] | None:
    """``hands`` (None, or a list of Hand with 21 finite points each) as a list, or an
    InputError."""
    if hands is None:
        return None
    if isinstance(hands, (str, bytes)) or not isinstance(hands, Sequence):
        raise InputError(f"hands are a list of Hand, got {type(hands).__name__}")
    given = list(hands)
    for hand in given:
        if not isinstance(hand, Hand):
            raise InputError(f"a hand is a Hand (see MediaPipeHands), got {type(hand).__name__}")
        points = np.asarray(hand.landmarks)
        if points.shape != (HAND_POINTS, 2) or not np.isfinite(points).all():
            raise InputError(
                f"a hand's landmarks are {HAND_POINTS} finite (x, y) points, got shape "
                f"{points.shape}"
            )
    return given


class FaceSwapping:
    """What the engines share: :meth:`swap` over the given faces, each swapped into
    the output by the engine's ``_swap_into``; with ``mask_hands`` the hands in front
    of them laid back over it, and with an :attr:`occluder` what it finds in front of
    each face."""

    options: SwapOptions
    # Built on the first swap that asks for it (see hands_near), one per swapper.
    _hand_finder: HandFinder | None = None
    # An ONNX face occluder the user brings (see with_occluder); None: none.
    occluder: Occluder | None = None

    def with_occluder(self: _Swapping, occluder: Occluder | None) -> _Swapping:
        """This swapper (sharing its models) with ``occluder``: whatever it finds in
        front of a target face (a hand, a microphone, hair) stays the target's, left
        out of what the swap measures on the target, as a hand is with
        ``mask_hands``. None: no occluder. (The embedded engine's also prepares a
        source given as Faces again with it: see :meth:`Swapper.with_occluder`.)"""
        if occluder is not None and not isinstance(occluder, Occluder):
            raise InputError(
                "occluder is a FaceOccluder, a FaceParser, FaceAreas or Occluders of them, got "
                f"{type(occluder).__name__}"
            )
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.occluder = occluder
        return other

    def occlusions(self, frame: Frame, faces: list[Face] | Face) -> list[Occlusion | None]:
        """What the occluder finds in front of each given face (None for each without
        an occluder)."""
        targets = target_faces(frame, faces)
        if self.occluder is None:
            return [None] * len(targets)
        return [occlusion_of(self.occluder, frame, face) for face in targets]

    def swap(
        self,
        frame: Frame,
        faces: list[Face] | Face,
        *,
        hands: Sequence[Hand] | None = None,
        occlusions: Sequence[Occlusion | None] | None = None,
    ) -> Frame:
        """Swap every given target face in ``frame``; returns a new frame.

        With ``mask_hands``, the hands near those faces (``hands``, or when None
        those :meth:`hands_near` finds) stay in front of them. With an occluder, what
        covers each face (``occlusions``, one per face, or when None those
        :meth:`occlusions` finds) stays the target's.

        Raises:
            InputError: ``frame`` is not a uint8 (H, W, 3) BGR image, or ``faces`` is not
                a Face or a list of them, or one was found in a frame of another size,
                or ``occlusions`` are not one per face, or ``hands`` are not Hands.
        """
        targets = target_faces(frame, faces)
        given = None if occlusions is None else checked_occlusions(occlusions, len(targets))
        hands = checked_hands(hands)
        out = frame.copy()
        if self.options.fusion <= 0.0:
            return out
        if self.options.mask_hands and hands is None:
            hands = self.hands_near(frame, targets)
        kept = list(hands) if self.options.mask_hands and hands else []
        for face, occlusion in zip(
            targets, self.occlusions(frame, targets) if given is None else given, strict=True
        ):
            cover = None if occlusion is None else occlusion.cover(face, frame.shape)
            # What covers the face goes back as it was before this face's swap (not as
            # the frame was: a neighbour swapped already keeps its swap).
            before = None if cover is None else out[cover[0]].copy()
            self._swap_into(out, face, kept, occlusion)
            if cover is not None and before is not None:
                lay_back(out, before, cover)
        if kept:
            keep_hands(out, frame, [hand.landmarks for hand in kept])
        return out

    def hands_near(self, frame: Frame, faces: list[Face] | Face) -> list[Hand]:
        """The hands round the given faces (see :class:`MediaPipeHands`); the finder
        is built on the first call."""
        targets = target_faces(frame, faces)
        if not targets:
            return []
        if self._hand_finder is None:
            self._hand_finder = MediaPipeHands()
        return self._hand_finder.find(frame, [face.bbox for face in targets])

    def _swap_into(
        self,
        out: Frame,
        target_face: Face,
        hands: Sequence[Hand] = (),
        occlusion: Occlusion | None = None,
    ) -> None:
        """Swap one target face, writing into ``out`` (which holds the target frame);
        ``hands`` in front of it, and what ``occlusion`` says covers it, are left out
        of what is measured on the target (they are laid back over the output
        afterwards)."""
        raise NotImplementedError


class Swapper(FaceSwapping):
    """Swaps (or fuses) one source identity onto target faces.

    Args:
        source_face: the source face, as returned by :class:`~faceweave.FaceAnalyser`
            (it carries its image), or a prepared :class:`SourceModel`; or a list of
            them, several photos of the same person, merged by :func:`merge_sources`
            (the first leads; a turned photo gives the far side its own texture).
        occluder: a face occluder or parser (:class:`~faceweave.FaceOccluder`,
            :class:`~faceweave.FaceParser`, a model you bring, or
            :class:`~faceweave.Occluders` of both): what it finds in front of a target
            face stays the target's, and in front of the source's face is hidden, as a
            hand is (see with_occluder).
        fusion, shape, color, blend, mask_mouth, mask_lips, mask_eyes, mask_glasses,
        feather, mask_padding, uv_size, work_size: see :class:`SwapOptions`.

    Example:
        >>> swapper = Swapper(source_face, fusion=0.7, blend="poisson")  # doctest: +SKIP
        >>> out = swapper.swap(frame, faces)  # doctest: +SKIP
    """

    def __init__(
        self,
        source_face: SourcePhotos,
        *,
        occluder: Occluder | None = None,
        **options: object,
    ) -> None:
        if occluder is not None and not isinstance(occluder, Occluder):
            raise InputError(
                "occluder is a FaceOccluder, a FaceParser, FaceAreas or Occluders of them, got "
                f"{type(occluder).__name__}"
            )
        self.occluder = occluder
        self.model = load_face_model()
        self.options = SwapOptions.from_kwargs(options)
        photos = list(source_face) if isinstance(source_face, (list, tuple)) else [source_face]
        self._photos = photos  # for with_options at another uv_size
        # Shared with the swappers made from this one (with_options, with_occluder): a
        # tracked face's state, which each swapper follows apart, starts from theirs.
        self._lineage = object()
        models = []
        for number, photo in enumerate(photos):
            if isinstance(photo, SourceModel):
                models.append(photo)
            elif isinstance(photo, Face):
                # What the first photo shows is what every swap shows; the others only
                # fill in what they saw better, so their advice is not logged.
                models.append(
                    prepare_source(
                        photo,
                        model=self.model,
                        uv_size=self.options.uv_size,
                        log_advice=number == 0,
                        face_occluder=occluder,
                    )
                )
            elif photo is None:
                raise NoFaceError("no source face given")
            else:
                raise InputError(
                    "a source is a Face (from FaceAnalyser.get_faces or fw.get_one_face), "
                    f"a prepared source or a list of them, got {type(photo).__name__}; "
                    "fw.FacePredictor takes image paths and frames"
                )
        if not models:
            raise NoFaceError("no source face given")
        self.source = merge_sources(models)
        if len(models) > 1:
            mixed = _same_person_advice([m.face for m in models])
            for line in mixed:
                advice_logger.warning("%s", line)
            self.source = replace(self.source, advice=(*self.source.advice, *mixed))
        if self.source.albedo.shape[0] != self.options.uv_size:
            raise UsageError(
                f"the prepared source was built at uv_size {self.source.albedo.shape[0]}, "
                f"not {self.options.uv_size}: pass the Face, or prepare it with "
                f"prepare_source(face, uv_size={self.options.uv_size})"
            )
        self.masks = build_uv_masks(self.model, self.options)
        source_weight = self.masks.source_weight * (1.0 - self.source.occluder) * self.source.valid
        # What covers the source's face (a fringe, hair at the temples) is the mask's edge
        # too, not only the source's weight: the target's skin that shows there then meets
        # the swapped face through the blend, whose low frequencies cross over a wide
        # band. Inside the mask it had met it through the weight's narrow ramp alone, and
        # where the target's light differs (a shaded forehead) that left a band across it.
        face_mask = self.masks.face * (1.0 - self.source.occluder)
        # Face-space lookups as 8-bit textures: remapping bytes costs a third of floats,
        # and 1/255 steps are finer than anything these masks or the photo resolve.
        aux = np.dstack([face_mask, source_weight, self.masks.skin, self.masks.edge])
        self._uv_aux = np.round(np.clip(aux, 0.0, 1.0) * 255.0).astype(np.uint8)
        # Where a target's fringe is looked for, the skin its colour is measured on, the
        # skin the light match compares, and the outer face it may light up further
        # (smooth: the coarse grid is enough for them).
        zones = np.dstack(
            [
                self.masks.forehead,
                self.masks.cheeks,
                self.masks.lit,
                _uv_outer(self.model, self.masks.lit.shape[0]),
            ]
        )
        self._uv_zones = np.round(zones * 255.0).astype(np.uint8)
        self._uv_beard = _uv_beard_zones(self.model, self.masks.skin.shape[0])
        self._uv_glasses = np.round(self.masks.glasses * 255.0).astype(np.uint8)
        # The same band feathered, for a source whose glasses stay in its texture.
        self._uv_glasses_soft: NDArray[np.uint8] | None = None
        if self.source.glasses:
            # Out to a large frame's rims (Grace Hopper's lower rims lay past the target's
            # band, and showed as red streaks beside p19's nose).
            uv_size = self.options.uv_size
            band = _uv_glasses_band_at(self.model, uv_size, GLASSES_SOURCE_REACH)
            soft = cv2.GaussianBlur(band, (0, 0), GLASSES_BAND_FEATHER * uv_size)
            self._uv_glasses_soft = np.round(np.clip(soft, 0.0, 1.0) * 255.0).astype(np.uint8)
        # How widely the source smiles (see SMILE_SOURCE_WIDTH), and its texture with
        # the smile's folds flattened for targets whose mouths are narrower.
        self._smile_width = mouth_width(self.source.shape)
        self._smiles = _ramp(self._smile_width, SMILE_SOURCE_WIDTH)
        folds = _uv_smile_folds(self.model, self.options.uv_size)
        fold_skin = self.masks.skin * self.source.valid * (1.0 - self.source.occluder)
        flat: NDArray[np.float32] | None = None
        if self._smiles > 0.0:
            flat = _flatten_folds(self.source.texture, folds, fold_skin)
        # The source's shadows, to take the colour of the target's own (see
        # _match_shadow_tint), the flattened texture's too: as the fourth byte channel
        # of the texture looked up (OpenCV remaps four byte channels faster than three,
        # and a lone one slower still), and on their own for ``sh`` (an albedo's floats).
        shaded = self.masks.skin & (self.source.valid > 0.5) & (self.source.occluder < 0.5)
        if self.source.glasses:
            shaded &= self.masks.glasses < 0.5  # frames kept: their colour is no shade
        shade_skin = shaded.astype(np.float32)
        self._uv_shade = _source_shadows(self.source.texture, shade_skin)
        self._texture_u8 = _texture_bytes(self.source.texture, self._uv_shade)
        # Its detail in the smile's band, against which a still target's folds are laid
        # (see _lay_smile_folds).
        self._fold_rest = creases.texture_detail(
            self._texture_u8, self.model, creases.CREASE_SIZE, SMILE_FOLD_SIGMAS
        )
        self._flat_texture: NDArray[np.float32] | NDArray[np.uint8] | None = None
        self._flat_shade: NDArray[np.uint8] | None = None
        if flat is not None:
            self._flat_shade = _source_shadows(flat, shade_skin)
            if self.options.color == "sh":
                self._flat_texture = _flatten_folds(self.source.albedo, folds, fold_skin)
            else:
                self._flat_texture = _texture_bytes(flat, self._flat_shade)
        self._uv_profile_quality = _profile_quality(self.source, self.options.uv_size)
        self._eyes = self._eye_patches()
        # How much colour the source photo has (0 for black and white or toned): a
        # colourless source takes the target's own colours (see _take_target_chroma).
        texels = self.source.texture[self.masks.skin & (self.source.valid > 0.9)]
        self._source_colour = 1.0
        if len(texels) >= 64:
            self._source_colour = color_ops.colourfulness(_pixel_stats(texels)[0])
        # The fine detail as bytes (128 is none) at twice the texture's size and at it,
        # each with the face-locked grain (see _grain_texture) as a second channel,
        # the detail with the smile's folds flattened as a third (see
        # _flatten_fine_folds) and an empty fourth (OpenCV remaps four byte channels
        # faster than three). No
        # detail for a photo with next to none (an upsampled small face's is about 0.3
        # grey levels, a sharp photo's 1.3-2; measured at every fourth texel).
        fine_size = 2 * self.options.uv_size
        fine = self.source.fine
        has_fine = fine is not None and fine.shape[0] == fine_size and _has_detail(fine)
        self._fine_levels: tuple[NDArray[np.uint8], NDArray[np.uint8]] | None = None
        if has_fine or self.options.detail > 0:
            photo = (
                fine if has_fine and fine is not None else np.zeros((fine_size,) * 2, np.float32)
            )
            flat_photo = (
                _flatten_fine_folds(
                    photo,
                    cv2.resize(folds, (fine_size, fine_size), interpolation=cv2.INTER_LINEAR),
                )
                if self._smiles > 0.0
                else photo
            )
            levels = []
            for level, level_flat, noise in zip(
                (photo, cv2.pyrDown(photo)),
                (flat_photo, cv2.pyrDown(flat_photo)),
                _grain_texture(fine_size),
                strict=True,
            ):
                levels.append(
                    cv2.merge(
                        [
                            np.asarray(cv2.add(level, 128.0, dtype=cv2.CV_8U), np.uint8),
                            noise,
                            np.asarray(cv2.add(level_flat, 128.0, dtype=cv2.CV_8U), np.uint8),
                            np.full(level.shape, 128, np.uint8),
                        ]
                    )
                )
            self._fine_levels = (levels[0], levels[1])
        self._has_fine = has_fine
        self._uv_extent = tuple(np.ptp(self.model.uv, axis=0).tolist())
        # Per eye, the colours it is drawn in: "target" (white-balanced, after the
        # colour match) or "source" (the photo's, before it: a patch whose white does
        # not balance, or no colour match at all); None: no patch.
        self._eye_spaces = tuple(
            None
            if patch is None
            else "target"
            if patch.balanced and self.options.color != "none"
            else "source"
            for patch in self._eyes
        )
        self._hole_codes = np.append(self.model.hole_of_triangle, np.int8(-1))  # [-1] -> -1
        self.identity = _identity_shape(self.model)
        self.brow_lift = _brow_lift(self.model)
        # OpenCV builds its float Lab tables on first use (~0.1 s): pay it here, not on frame one.
        cv2.cvtColor(np.zeros((1, 1, 3), np.float32), cv2.COLOR_BGR2Lab)

    def _eye_patches(self) -> tuple[eyeball.EyePatch | None, ...]:
        """The source's eyeballs; none when the target's eyes are kept anyway."""
        return (None, None) if self.options.mask_eyes else self.source.eyes

    def _paint_eyes(
        self,
        source: NDArray[np.float32],
        points: NDArray[np.float32],
        triangle: NDArray[np.int32] | None,
        backdrop: NDArray[np.float32],
        colour: float,
        space: str,
    ) -> None:
        """Paint the source's eyeballs into ``source`` (processing-crop pixels), in
        the target's lids, where the output's irises are (or, with ``gaze="source"``,
        where the photo's sat), white-balanced to the target's whites.

        Args:
            source: the warped source texture, painted in place.
            points: the output mesh's vertices in processing-crop pixels.
            triangle: the coarse raster's triangle per pixel (which opening shows),
                or None when no opening can be hidden (a face turned little).
            backdrop: the target warped to the output geometry (its own eyes).
            colour: the target skin's colourfulness (0 for a black-and-white photo:
                the eyes are drawn grey too).
            space: which eyeballs to draw (see ``_eye_spaces``): ``source``, before
                the colour match, in the photo's colours; ``target``, after it,
                white-balanced.
        """
        # Which opening each coarse grid pixel shows (-1: none; hole codes as in
        # FaceModel.hole_of_triangle), by one lookup.
        hole = None if triangle is None else self._hole_codes[triangle]
        for (loop, first, left, right), patch, eye_space, code in zip(
            _eye_layout(self.model),
            self._eyes,
            self._eye_spaces,
            (HOLE_EYE_LEFT, HOLE_EYE_RIGHT),
            strict=True,
        ):
            if patch is None or eye_space != space:
                continue
            # Where this opening is drawn at all (not behind a turned head's nose),
            # grown by a grid pixel so that the drawn outline is the lids' own.
            shown = (
                None
                if hole is None
                else cv2.dilate((hole == code).astype(np.uint8) * 255, np.ones((3, 3), np.uint8))
            )
            eyeball.paint_eye(
                source,
                patch,
                points[loop],
                points[first : first + 5],
                points[[left, right]],
                backdrop,
                shown,
                gaze=self.options.gaze,
                space=space,
                colour=colour,
            )

    def with_options(self, **changes: object) -> Swapper:
        """A swapper with some options changed, reusing the prepared source.

        For another ``uv_size`` a source given as Faces is prepared again from them
        (from each Face's ``frame``, as it is now), without logging its advice again;
        a source given prepared cannot change its size (a UsageError).
        """
        opts = SwapOptions.from_kwargs({**self.options.__dict__, **changes})
        source = self.source
        faces = [p for p in self._photos if isinstance(p, Face)]
        if opts.uv_size != self.options.uv_size and len(faces) == len(self._photos):
            models = [
                prepare_source(
                    f,
                    model=self.model,
                    uv_size=opts.uv_size,
                    log_advice=False,
                    face_occluder=self.occluder,
                )
                for f in faces
            ]
            source = replace(merge_sources(models), advice=self.source.advice)
        swapper = Swapper(source, occluder=self.occluder, **opts.__dict__)
        swapper._photos = self._photos  # the photos it came from, for a later size change
        swapper._lineage = self._lineage
        return swapper

    def with_occluder(self, occluder: Occluder | None) -> Swapper:
        """This swapper with ``occluder`` (see FaceSwapping.with_occluder); a source
        given as Faces is prepared again from them with it, so that what it finds in
        front of the source's face too is hidden, as a hand is (about 0.2 s; a source
        given prepared is kept as it is)."""
        other = super().with_occluder(occluder)
        faces = [p for p in self._photos if isinstance(p, Face)]

        # The photos are looked at with the occluder's for_source (face areas with
        # none, a parser with every face region): when that is what they were
        # prepared with, the source stands.
        def on_photo(o: Occluder | None) -> Occluder | None:
            return None if o is None else o.for_source()

        same = occluder is self.occluder or on_photo(occluder) is on_photo(self.occluder)
        if same or not faces or len(faces) != len(self._photos):
            return other
        models = [
            prepare_source(
                f,
                model=self.model,
                uv_size=self.options.uv_size,
                log_advice=False,
                face_occluder=occluder,
            )
            for f in faces
        ]
        source = replace(merge_sources(models), advice=self.source.advice)
        swapper = Swapper(source, occluder=occluder, **self.options.__dict__)
        swapper._photos = self._photos
        swapper._lineage = self._lineage
        return swapper

    def _shape_amount(self, target_face: Face) -> float:
        """How much of the identity offset the output mesh takes (see output_geometry)."""
        turned = _ramp(abs(target_face.pose.yaw), PROFILE_SHAPE_YAW)
        return self.options.shape * fusion_mix(self.options.fusion) * (1.0 - turned)

    def _lids_shut(self, target_face: Face, frame: Frame | None) -> float:
        """How far the output's lids close (0..1, with the fusion): a still target's
        eyes its photo shows shut (1 - eyes_seen; the mesh reads closed lids as open).
        A video track's mesh follows the lids (its blinks close it): none there."""
        if target_face.rest is not None or frame is None:
            return 0.0
        return (1.0 - eyes_seen(target_face, frame)) * fusion_mix(self.options.fusion)

    def output_geometry(self, target_face: Face, frame: Frame | None = None) -> NDArray[np.float32]:
        """(478, 3) output mesh: target pose and expression, source identity shape.

        The identity offset is measured against the target's shape at rest where a
        video track knows it (``Face.rest``), else against its shape in this frame:
        the offset's anchors include the brows, so measured against the frame a
        raised brow or a frown came through at 1 - ``shape`` of its height (now
        1 - ``shape`` * STILL_BROW_SHAPE: a still's brows take that share). A
        target read as turned past PROFILE_SHAPE_YAW takes less of it, none beyond.
        A still's eyes that ``frame`` (default: the face's own) shows shut are
        closed (see LID_MEET), and its brows go where it shows them (see
        :meth:`_lift_brows`; not for a source whose glasses stay in its texture)."""
        frame = target_face.frame if frame is None else frame
        target_face = self._track_view(target_face, step=False)
        shut = self._lids_shut(target_face, frame)
        if frame is not None and self._lifts_output_brows:
            target_face = self._lift_brows(target_face, frame, follow=False)
        return self._output_geometry(target_face, shut)

    @property
    def _lifts_output_brows(self) -> bool:
        """Whether the output's brows go where a lift puts the target's: not for a
        source whose glasses stay in its texture (lifting its brows would stretch
        their frames up; the target's brows are drawn down to them instead)."""
        return not self.source.glasses

    def target_geometry(self, target_face: Face, frame: Frame | None = None) -> NDArray[np.float32]:
        """(478, 3) where the swap finds the target's pixels: its mesh, with the brows
        where ``frame`` (default: the face's own) shows them (see :meth:`_lift_brows`;
        a video track's eased lifts are read, not moved on)."""
        frame = target_face.frame if frame is None else frame
        if frame is None:
            return np.asarray(target_face.landmarks_478, np.float32)
        target_face = self._track_view(target_face, step=False)
        return np.asarray(self._lift_brows(target_face, frame, follow=False).landmarks_478)

    def _track_view(self, target_face: Face, step: bool = True) -> Face:
        """``target_face`` with the track state this swapper follows over its track's
        frames (its brows' lifts, its edge colour), apart from any other swapper's: a
        second swapper on the same tracked faces (a preview with other options) had
        moved the first one's on, and a second swap of one frame had moved it twice.
        ``step``: the state for a swap of this frame (a new frame goes on from the last
        one's; this frame again starts over from the same point); else a copy of the
        latest, to read. A swapper new to the track starts from where the one it was
        made from, or made with it, left off (live, a fusion slider's every setting is
        a swapper of its own: the face's edge colour and brows go on as they were)."""
        state = target_face.track_state
        if state is None:
            return target_face
        with _TRACK_VIEWS_LOCK:
            views = state.setdefault("swappers", weakref.WeakKeyDictionary())
            slot = views.get(self)
            if slot is None:
                kin = [v for v in views.values() if v["lineage"] is self._lineage]
                latest = max(kin, key=lambda v: v["stamp"])["now"] if kin else {}
                slot = views[self] = {
                    "face": None,
                    "before": {},
                    "now": _state_copy(latest),
                    "lineage": self._lineage,
                    "stamp": 0,
                }
            if not step:
                return replace(target_face, track_state=_state_copy(slot["now"]))
            last = slot["face"]
            if last is None or last() is not target_face:  # a new frame
                slot["before"], slot["face"] = slot["now"], weakref.ref(target_face)
            slot["now"] = _state_copy(slot["before"])
            slot["stamp"] = next(_TRACK_STEPS)
            return replace(target_face, track_state=slot["now"])

    def _lift_brows(self, target_face: Face, frame: Frame, follow: bool = True) -> Face:
        """The target face with its mesh's brows moved up to where ``frame`` shows them
        (:func:`faceweave.core.brows.brow_lifts`): the mesh follows a raised brow only
        part of the way, and the output's brows stayed below the target's real ones,
        which showed above them where the target's own forehead does (under a source's
        fringe: two pairs of brows). A video track's lifts are followed over its
        frames (BROW_FOLLOW a frame, in its track state), so a raise eases in and out
        rather than jumping (``follow`` False reads them without a step)."""
        state = target_face.track_state
        if state is not None and not follow and "brow_lifts" in state:
            lifts = state["brow_lifts"]
        else:
            lifts = brow_lifts(frame, target_face.landmarks_478, self.model, target_face.pose.yaw)
            if state is not None and follow:
                last = state.get("brow_lifts", (0.0, 0.0))
                lifts = tuple(a + BROW_FOLLOW * (b - a) for a, b in zip(last, lifts, strict=True))
                state["brow_lifts"] = lifts
        if max(lifts) < BROW_LIFT_MIN:
            return target_face
        landmarks = self.brow_lift.apply(target_face.landmarks_478, target_face.pose, lifts)
        return replace(target_face, landmarks_478=landmarks)

    def _output_geometry(self, target_face: Face, shut: float) -> NDArray[np.float32]:
        amount = self._shape_amount(target_face)
        target_norm = to_pose_space(target_face.landmarks_478, target_face.pose)
        unfolded = (
            None
            if target_face.rest is None
            else unfold_creases(target_norm, target_face.rest, self.model)
        )
        if amount <= 0:
            points = (
                target_face.landmarks_478
                if unfolded is None
                else from_pose_space(unfolded, target_face.pose)
            )
            return close_lids(points, self.model, shut)
        if unfolded is not None:
            target_norm = unfolded
        rest = target_norm if target_face.rest is None else target_face.rest
        # A still has no face at rest: its brows' offset, measured against the frame,
        # holds their expression too (a raise, a frown), which the full offset would
        # replace with the source's brows. They take STILL_BROW_SHAPE of it.
        delta = self.identity.identity_delta(
            self.source.shape, rest, brows=STILL_BROW_SHAPE if target_face.rest is None else 1.0
        )
        # Keep the target's silhouette: no shape change where the surface is seen edge-on
        # (moving a turned head's outline would smear the background next to it).
        normals = vertex_normals(target_face.landmarks_478, self.model.triangles)
        facing = np.minimum(np.maximum((np.abs(normals[:, 2:3]) - 0.25) / 0.35, 0.0), 1.0)
        moved = target_norm + amount * facing * delta
        return close_lids(from_pose_space(moved, target_face.pose), self.model, shut)

    def swap_face(self, frame: Frame, target_face: Face) -> Frame:
        """Swap one target face; returns a new frame (:meth:`swap` with that face: its
        checks, and with ``mask_hands`` its hands kept)."""
        return self.swap(frame, [target_face])

    def _swap_into(
        self,
        out: Frame,
        target_face: Face,
        hands: Sequence[Hand] = (),
        occlusion: Occlusion | None = None,
    ) -> None:
        """Swap one target face, writing into ``out`` (which holds the target frame)."""
        frame = out
        opts = self.options
        model = self.model
        target_face = self._track_view(target_face)
        # The target with its brows where the frame shows them: there its pixels are
        # found, and there the output's brows go (see _lifts_output_brows).
        lifted = self._lift_brows(target_face, frame)
        shut = self._lids_shut(target_face, frame)
        shaped = lifted if self._lifts_output_brows else target_face
        out_verts = model.extend(self._output_geometry(shaped, shut))
        tgt_verts = model.extend(lifted.landmarks_478)
        h, w = frame.shape[:2]
        # Crop: the output mesh's box with a margin for the blend.
        x0f, y0f = out_verts[:, :2].min(0)
        x1f, y1f = out_verts[:, :2].max(0)
        margin = 0.08 * max(x1f - x0f, y1f - y0f) + 4
        x0 = int(max(0, np.floor(x0f - margin)))
        y0 = int(max(0, np.floor(y0f - margin)))
        x1 = int(min(w, np.ceil(x1f + margin) + 1))
        y1 = int(min(h, np.ceil(y1f + margin) + 1))
        if x1 - x0 < 8 or y1 - y0 < 8:
            return
        cw, ch = x1 - x0, y1 - y0
        # Processing size: large faces are swapped at most process_size pixels wide and
        # composited back at full resolution (the source texture has no more detail).
        ps = min(1.0, opts.process_size / max(cw, ch))
        pw, ph = max(8, int(round(cw * ps))), max(8, int(round(ch * ps)))
        k = min(1.0, opts.work_size / max(pw, ph))
        rw, rh = max(8, int(round(pw * k))), max(8, int(round(ph * k)))
        sx, sy = (rw - 1) / max(cw - 1, 1), (rh - 1) / max(ch - 1, 1)
        grid_pts = (out_verts[:, :2] - np.array([x0, y0], np.float32)) * np.array(
            [sx, sy], np.float32
        )
        # No back-face culling: mesh noise makes a few small triangles face away
        # (nose wings) and culling would punch holes; the depth order hides the rest.
        raster = rasterize(grid_pts, model.render_triangles, (rh, rw), depth=out_verts[:, 2])
        # Per-vertex attributes: UV, target position (processing-crop pixels), and for
        # the SH mode the target's shading.
        to_proc = np.array([(pw - 1) / max(cw - 1, 1), (ph - 1) / max(ch - 1, 1)], np.float32)
        normals_out = vertex_normals(out_verts, model.render_triangles)
        # Where each output pixel finds the target: lids it shows shut are closed there
        # as in the output (its pixels there stay its own; only the mesh read them open).
        tgt_found = (
            tgt_verts if shut <= 0 else model.extend(close_lids(lifted.landmarks_478, model, shut))
        )
        columns = [
            model.uv * (opts.uv_size - 1),
            (tgt_found[:, :2] - np.array([x0, y0], np.float32)) * to_proc,
            # Grazing surface (a turned head's silhouette): where the fitted mesh may
            # overhang the real face onto background.
            np.minimum(np.maximum((0.85 - np.abs(normals_out[:, 2:3])) / 0.4, 0.0), 1.0),
        ]
        if opts.color == "sh":
            tgt_normals = vertex_normals(tgt_verts, model.render_triangles)
            skin_vertices = _skin_vertices(model)
            tgt_light = _fit_light(frame, tgt_verts, tgt_normals, skin_vertices, target_face.size)
            columns.append(_clamped_shading(normals_out, tgt_light, tgt_normals, skin_vertices))
        attributes = np.concatenate(columns, axis=1)
        maps = raster.interpolate(attributes, model.render_triangles)
        grid_u, grid_v = np.ascontiguousarray(maps[..., 0]), np.ascontiguousarray(maps[..., 1])

        def on_grid(texture: NDArray[np.uint8]) -> NDArray[np.uint8]:
            looked_up = cv2.remap(
                texture, grid_u, grid_v, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
            )
            looked_up[~raster.covered] = 0
            return np.asarray(looked_up, np.uint8)

        # Where a target's fringe is looked for and the cheeks' skin, on the coarse grid
        # the target's occluders are found on (see _target_occluders); where its beard
        # (or a face mask) is looked for, and the skin its colour is measured on.
        zones = on_grid(self._uv_zones)
        beard_zones = on_grid(self._uv_beard)
        coverage = raster.covered.astype(np.float32)
        outline = coverage  # the mask's edge (see _outline_coverage)
        if (rw, rh) != (pw, ph):
            folds = _uv_folds(maps, raster.covered)
            # Normalised upsampling: uncovered grid pixels carry no weight, so values
            # next to the mesh border are not pulled towards a placeholder.
            maps = cv2.resize(maps, (pw, ph), interpolation=cv2.INTER_LINEAR)
            outline = _outline_coverage(coverage, (pw, ph))
            coverage = cv2.resize(coverage, (pw, ph), interpolation=cv2.INTER_LINEAR)
            # Only the mesh's rim needs it: inside, the coverage is 1 (outside 0, and
            # the values 0): a division over the whole crop cost 0.25 ms.
            rim = np.flatnonzero((coverage > 0.0) & (coverage != 1.0))
            flat = maps.reshape(-1, maps.shape[2])
            flat[rim] /= coverage.reshape(-1)[rim, None]
            if folds is not None:
                _sharpen_folds(maps, folds, raster, model, attributes, out_verts, (x0, y0), to_proc)
        # (np.minimum/maximum: np.clip's own overhead is most of its cost on these.)
        coverage = np.minimum(np.maximum((coverage - 0.5) * 2.0, 0.0), 1.0)
        # Fixed-point UV maps (1/32 texel), built once for the two face-space lookups.
        u_map, v_map = np.ascontiguousarray(maps[..., 0]), np.ascontiguousarray(maps[..., 1])
        uv_map, uv_frac = cv2.convertMaps(u_map, v_map, cv2.CV_16SC2)
        # Face mask, source weight and skin texels in one lookup.
        aux = cv2.remap(
            self._uv_aux, uv_map, uv_frac, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT
        ).astype(np.float32)
        aux *= np.float32(1.0 / 255.0)
        mask = np.ascontiguousarray(aux[..., 0] * outline)
        weight = aux[..., 1]
        kept = _profile_kept(target_face, u_map, v_map, model, opts.uv_size)
        if kept is not None:
            # (The same ramp as _profile_kept's: kept is None below it.)
            profile = _ramp(abs(target_face.pose.yaw), PROFILE_KEEP_YAW)
            quality = cv2.remap(self._uv_profile_quality, uv_map, uv_frac, cv2.INTER_LINEAR).astype(
                np.float32
            )
            weight = weight * (1.0 - kept) * (1.0 - np.float32(profile / 255.0) * (255.0 - quality))
        if opts.mask_mouth:
            inner_lips = (tgt_verts[model.loops[2], :2] - np.array([x0, y0], np.float32)) * to_proc
            _cut_mouth(weight, inner_lips)
        skin = (aux[..., 2] > 0.5) * coverage
        edge = np.maximum(aux[..., 3], maps[..., 4])
        target_crop = frame[y0:y1, x0:x1]
        target_proc = (
            target_crop
            if (pw, ph) == (cw, ch)
            # Bilinear: the processing size is never far below the crop (a 1080p face
            # is about 1.8x), and an area filter costs 0.5 ms more here.
            else cv2.resize(target_crop, (pw, ph), interpolation=cv2.INTER_LINEAR)
        )
        if opts.mask_mouth:
            outer_lips = (
                tgt_verts[list(OUTER_LIPS), :2] - np.array([x0, y0], np.float32)
            ) * to_proc
            _cut_mouth_gap(weight, target_proc, outer_lips, inner_lips)
        # Measured on the coarse grid, where it is smooth.
        target_small = _shrink(target_proc, (rw, rh))
        occluders, colour, skin_bgr = _target_occluders(
            target_small,
            skin,
            edge,
            # (Clear of the cheeks' edge: the lids, nostrils and lips next to it.)
            cv2.erode((zones[..., 1] > 127).astype(np.uint8), np.ones((3, 3), np.uint8)),
            zones[..., 0].astype(np.float32) * np.float32(1.0 / 255.0),
            _ramp(abs(target_face.pose.yaw), TARGET_DARK_YAW),
            target_proc,
        )
        beard = _target_beard(target_small, beard_zones)
        if beard is not None:
            # (Not faded with the coverage at the outline, where the face mask fades.)
            beard = cv2.resize(beard, (pw, ph), interpolation=cv2.INTER_LINEAR)
            occluders = np.maximum(occluders, beard)
            # Nor is the colour match measured there.
            skin = skin * (beard < 0.5)
        off_skin = _off_skin(target_small, skin, (pw, ph))
        if off_skin is not None:
            # Anywhere on the face, what is far off the skin's hue (a coloured object, a
            # sticker, face paint) is not measured as its skin: swapped over as before,
            # but its colour no longer casts over the whole face. (After a cover of the
            # lower face is left out: the skin's hue is then the rest's.)
            skin = skin * (1.0 - off_skin)
        keep_target = 1.0 - occluders
        if hands:
            # A hand in front of the face (mask_hands) is the target's, as an occluder is:
            # its colour and light are not the face's, to match or to blend into it.
            held = hands_area(
                [hand.landmarks for hand in hands],
                (ph, pw),
                offset=(x0, y0),
                scale=float(np.mean(to_proc)),
            )
            if held.any():
                keep_target = keep_target * (1.0 - held)
                skin = skin * (held < 0.5)
        if occlusion is not None:
            # What the occluder finds in front of the face, likewise.
            to_frame = np.array([[1.0 / to_proc[0], 0.0, x0], [0.0, 1.0 / to_proc[1], y0]])
            seen = occlusion.in_crop(to_frame, (pw, ph))
            keep_target = keep_target * seen
            skin = skin * (seen > 0.5)
        # How much of the band where frames sit stays the target's, for a source whose
        # glasses stay in its texture. On a turned head those glasses, drawn on the skin,
        # no longer read as glasses: their rims lie along the cheek as streaks (Grace
        # Hopper's on p15's profile and p19's turned face).
        glasses_band = 0.0
        if self._uv_glasses_soft is not None:
            glasses_band = _ramp(abs(target_face.pose.yaw), KEPT_GLASSES_YAW)
        if opts.mask_glasses and target_face.size >= LENS_MIN_FACE_PX:
            landmarks = (tgt_verts[:478, :2] - np.array([x0, y0], np.float32)) * to_proc
            if target_face.size >= GLASSES_MIN_FACE_PX:
                frames = _glasses_frames(target_proc, landmarks, self._uv_glasses, uv_map, uv_frac)
                if frames is not None:
                    keep_target *= 1.0 - frames * coverage
                    # Both wear glasses: the target's own on its own face, not the
                    # source's frames behind them.
                    glasses_band = max(glasses_band, float(frames.max()))
            lenses = _tinted_lenses(target_proc, landmarks, skin_bgr)
            if lenses is not None:
                keep_target *= 1.0 - lenses * coverage
        if glasses_band > 0.0 and self._uv_glasses_soft is not None:
            band = cv2.remap(self._uv_glasses_soft, uv_map, uv_frac, cv2.INTER_LINEAR)
            keep_target *= (
                1.0 - band.astype(np.float32) * np.float32(glasses_band / 255.0) * coverage
            )
        mask *= keep_target
        weight = weight * keep_target  # also in the texture: no glow across the blend
        # Else the output mesh is the target's.
        rewarped = 0.0  # how much of the target the output shows is its re-warped copy
        rewarped_proc = target_proc
        if self._shape_amount(target_face) > 0 or shut > 0:
            warped = cv2.remap(
                target_proc,
                maps[..., 2],
                maps[..., 3],
                cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_REPLICATE,
            )
            # Off the mesh the maps mean nothing: the target itself (a masked copy in
            # bytes is 4x cheaper than numpy's copyto on floats).
            cv2.copyTo(target_proc, (coverage <= 0).astype(np.uint8), warped)
            rewarped_proc = warped
            warped_target = warped.astype(np.float32)
            # The re-warp resamples the target through maps interpolated on a coarse
            # grid: even for a mesh moved by nothing it softens and shifts the eyes',
            # lips' and outline's edges (by up to 57 grey levels on the demo). Its share
            # grows with the fusion, so that a fusion just over 0 gives the target, not
            # a jump to its resampled copy; the mesh has then moved by a fraction of a
            # pixel.
            share = min(1.0, fusion_mix(opts.fusion) / FUSION_REWARP)
            rewarped = share
            if share < 1.0:
                warped_target = cv2.addWeighted(
                    warped_target, share, target_proc.astype(np.float32), 1.0 - share, 0.0
                )
        else:
            warped_target = target_proc.astype(np.float32)

        def lookup(texture: NDArray[np.generic]) -> NDArray[np.generic]:
            return np.asarray(
                cv2.remap(
                    texture, uv_map, uv_frac, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
                )
            )

        looked = lookup(self.source.albedo if opts.color == "sh" else self._texture_u8)
        # The smile's folds flattened by how much narrower the target's mouth is (see
        # SMILE_WIDTH_GAP); mixed before the bytes become floats, which costs less.
        target_width = mouth_width(to_pose_space(target_face.landmarks_478, target_face.pose))
        unsmile = 0.0
        if self._flat_texture is not None:
            unsmile = self._smiles * _ramp(self._smile_width - target_width, SMILE_WIDTH_GAP)
            if unsmile > 0.0:
                looked = cv2.addWeighted(
                    looked, 1.0 - unsmile, lookup(self._flat_texture), unsmile, 0.0
                )
        if opts.color == "sh":
            source = looked.astype(np.float32, copy=False)
            source *= np.maximum(maps[..., 5:8], 0.0)
            shade = lookup(self._uv_shade)
            if unsmile > 0.0 and self._flat_shade is not None:
                shade = cv2.addWeighted(
                    shade, 1.0 - unsmile, lookup(self._flat_shade), unsmile, 0.0
                )
        else:
            # (The shadows ride in the fourth channel, see _texture_bytes.)
            shade = cv2.extractChannel(looked, 3)
            source = cv2.cvtColor(looked, cv2.COLOR_BGRA2BGR).astype(np.float32)
        eye_points = (out_verts[:, :2] - np.array([x0, y0], np.float32)) * to_proc
        eye_masks = _eye_masks(model, eye_points, (ph, pw))
        _fade_shut_eyes(weight, model, eye_masks, target_face.landmarks_478)
        # Only a turned head's nose can hide part of an eye opening.
        eye_hidden = raster.triangle if abs(target_face.pose.yaw) > EYES_HIDDEN_YAW else None
        if "source" in self._eye_spaces:
            # Eyeballs that cannot be white-balanced (and all of them with no colour
            # match) go in now, in the photo's colours: the skin's colour map follows.
            self._paint_eyes(source, eye_points, eye_hidden, warped_target, colour, "source")
        enough_skin = cv2.countNonZero(cv2.compare(skin, 0.5, cv2.CMP_GE)) > 64
        if opts.color != "none" and enough_skin:
            source = color_ops.color_transfer(
                source,
                warped_target,
                source_mask=skin,
                target_mask=skin,
                mode="rct" if opts.color == "sh" else opts.color,
                strength=0.5 if opts.color == "sh" else 1.0,
                gain_range=COLOR_GAIN_RANGE,
                ridge=COLOR_RIDGE if opts.color == "lct" else 0.0,
                anchor_black=COLOR_ANCHOR_BLACK,
            )
        if opts.light > 0 and opts.color != "sh":
            # Skin seen in both (see _uv_lit): 255 where the source's own texels are used.
            lit = cv2.resize(zones[..., 2], (pw, ph), interpolation=cv2.INTER_LINEAR)
            on = cv2.compare(lit, 127, cv2.CMP_GT) & cv2.compare(weight, 0.5, cv2.CMP_GT)
            if off_skin is not None:  # (nor is the light of what is off the skin's hue)
                on &= cv2.compare(off_skin, 0.5, cv2.CMP_LT)
            grid = _SkinGrid.of(on)  # (once for both matches)
            if grid is not None:
                source = _match_light(source, target_proc, grid, opts.light, zones[..., 3])
                if opts.color != "none":
                    # ...and its colour from side to side, along the face's own
                    # left-right axis (from one eye's outer corner to the other's: a
                    # rolled head's, or a video's stored turned, is not the image's x).
                    across = out_verts[263, :2] - out_verts[33, :2]
                    source = _match_light_colour(source, target_proc, grid, opts.light, across)
        if "target" in self._eye_spaces:
            # After the colour and light match: the eyeballs take the target's white
            # as their own (see eyeball.paint_eye), not the skin's colour map.
            self._paint_eyes(source, eye_points, eye_hidden, warped_target, colour, "target")
        if opts.color != "none" and self._source_colour < 1.0 and colour > 0.0:
            source = _take_target_chroma(
                source, warped_target, 1.0 - self._source_colour, skin_bgr, skin
            )
        # A tracked face's colour matches are followed over its frames (its track's
        # state, see _edge_memory).
        memory = _edge_memory(target_face, self.source)
        if opts.color != "none" and enough_skin:
            source = _match_shadow_tint(
                source, warped_target, skin, np.asarray(shade, np.uint8), memory
            )
        if opts.detail > 0 and enough_skin:
            source = _match_detail(
                source,
                warped_target,
                skin,
                opts.detail,
                _eye_openings(eye_masks, (ph, pw)),
                grain=functools.partial(
                    self._grain_at,
                    (uv_map, uv_frac),
                    ((x1f - x0f) * to_proc[0], (y1f - y0f) * to_proc[1]),
                    # (A face drawn well above the processing size takes its grain
                    # at full resolution instead, see _fine_detail.)
                    1.0 - fine_fade(max(cw / pw, ch / ph)),
                ),
                cheeks=cv2.resize(zones[..., 1], (pw, ph), interpolation=cv2.INTER_LINEAR)
                * np.float32(1.0 / 255.0),
            )
        if opts.creases > 0 and target_face.rest_detail is not None:
            source = self._lay_creases(source, frame, target_face, (u_map, v_map))
        elif opts.creases > 0:
            # (Read from the crop at the processing size: a large face's detail costs
            # less to find there, and the band is coarser than its pixels.)
            shift = np.array([x0, y0, 0.0], np.float32)
            scale = np.array([to_proc[0], to_proc[1], to_proc[0]], np.float32)
            source = self._lay_smile_folds(
                source,
                target_proc,
                (target_face.landmarks_478 - shift) * scale,
                target_face,
                (u_map, v_map),
                target_width,
            )
        if opts.blend != "poisson" and enough_skin:
            # (Gradient-domain cloning matches the edge's colour by itself.) A tracked
            # face's offsets are followed over its frames (its track's state): its edge
            # changes from frame to frame (hair, background, the edge's own light), and
            # matched afresh in each they made the face flicker.
            source = _match_edge_colour(
                source,
                target_small,
                mask * weight,
                skin * keep_target,
                memory,
            )
        if kept is not None:
            # A profile: the source gives way where its colour still differs from the
            # target's (see PROFILE_AGREE), by the same ramp.
            weight = weight * (
                1.0 - _colour_disagreement(source, warped_target) * np.float32(profile)
            )
        # Outside the mask the foreground is the target itself, so a multiband or
        # Poisson blend has nothing foreign to spread across the seam (no glow).
        alpha = np.ascontiguousarray(
            fusion_mix(opts.fusion) * weight * np.minimum(np.maximum(mask * 20.0, 0.0), 1.0),
            np.float32,
        )
        fused = cv2.blendLinear(source, warped_target, alpha, np.float32(1.0) - alpha)
        if 0.0 < opts.fusion < 1.0:
            fused = _keep_fused_detail(
                fused,
                cv2.cvtColor(source, cv2.COLOR_BGR2GRAY),
                cv2.cvtColor(target_proc, cv2.COLOR_BGR2GRAY).astype(np.float32),
                alpha,
            )
        blended = blend_ops.blend(fused, target_proc, mask, mode=opts.blend)

        def rewarp_detail(
            coarse: Frame | None,
        ) -> list[tuple[tuple[slice, slice], NDArray[np.int16]]]:
            if rewarped <= 0.0:
                return []
            openings = [eye_points[loop] for loop in model.loops]
            return _rewarp_detail(
                target_crop, rewarped_proc, maps, (mask, alpha, rewarped), openings, coarse
            )

        if (pw, ph) == (cw, ch):
            for box, detail in rewarp_detail(None):
                blended[box] = cv2.add(blended[box], detail, dtype=cv2.CV_8U)
            out[y0:y1, x0:x1] = blended
            return
        support = (
            cv2.dilate(mask, np.ones((3, 3), np.uint8)) if opts.blend == "alpha" else _support(mask)
        )
        if max(cw / pw, ch / ph) < DETAIL_RESTORE_SCALE and not 0.0 < opts.fusion < 1.0:
            # Composite the upsampled swap with the full-resolution target: outside the
            # mask the target keeps every pixel of its own detail. (A fusion between 0
            # and 1 shows the target inside the mask too: it keeps its share of the
            # target's full-resolution detail below, which the resampling softens even
            # at 1.1x: Grace Hopper's film grain at fusion 0.25, 0.5 and 0.75 had come
            # out at 0.73-0.82 of the level between the target's and the full swap's.)
            up = cv2.resize(blended, (cw, ch), interpolation=COMPOSITE_UPSAMPLING)
            for box, detail in rewarp_detail(None):
                up[box] = cv2.add(up[box], detail, dtype=cv2.CV_8U)
            m = cv2.resize(support, (cw, ch), interpolation=cv2.INTER_LINEAR)
            out[y0:y1, x0:x1] = cv2.blendLinear(up, target_crop, m, 1.0 - m)
            return
        # A face processed well below its size: the target, plus the swap's change to it
        # (its difference from the processed target) upsampled. Where the output still
        # shows the target (its mouth interior, eyes or frames kept, hair at the mask's
        # edge) it keeps its full-resolution detail (teeth stay crisp); where the source
        # shows, the target's detail finer than the processing size is taken out (blended
        # with its own upsampled copy): it belongs to the target's features.
        source_share = cv2.resize(support * alpha, (cw, ch), interpolation=cv2.INTER_LINEAR)
        coarse = cv2.resize(target_proc, (cw, ch), interpolation=COMPOSITE_UPSAMPLING)
        base = cv2.blendLinear(coarse, target_crop, source_share, 1.0 - source_share)
        change = cv2.multiply(
            cv2.subtract(blended, target_proc, dtype=cv2.CV_32F),
            cv2.merge([support, support, support]),
            dtype=cv2.CV_16S,
        )
        change = cv2.resize(change, (cw, ch), interpolation=COMPOSITE_UPSAMPLING)
        for box, detail in rewarp_detail(coarse):
            change[box] = cv2.add(change[box], detail)
        texels_per_px = self._texels_per_px((x1f - x0f, y1f - y0f))  # (per crop pixel)
        # The eyeballs' detail too, unless a turned head's nose may hide part of one
        # (their coarse drawing takes that into account, this would not).
        eyes_at = (
            out_verts[:, :2] - np.array([x0, y0], np.float32)
            if abs(target_face.pose.yaw) <= EYES_HIDDEN_YAW
            else None
        )
        # Faded in over FINE_FADE above DETAIL_RESTORE_SCALE, where this way of
        # compositing starts: a face whose size hovers there (a video's) must not have
        # its detail pop in and out from frame to frame.
        fade = fine_fade(max(cw / pw, ch / ph))
        fine = (
            self._fine_detail(
                (u_map, v_map),
                texels_per_px,
                target_crop,
                source_share if fade >= 1.0 else source_share * np.float32(fade),
                skin * support * alpha,
                eyes_at,
                unsmile,
            )
            if fade > 0.0
            else None
        )
        if fine is not None:
            change = cv2.add(change, cv2.merge([fine, fine, fine]))
        out[y0:y1, x0:x1] = cv2.add(base, change, dtype=cv2.CV_8U)

    def _texels_per_px(self, extent: tuple[float, float]) -> float:
        """How many of the (S, S) texture's texels a pixel spans where the face's mesh
        spans ``extent`` (width, height) pixels: the mesh's extent in the texture over
        its extent in pixels, the larger (a turned face is foreshortened)."""
        return (self.options.uv_size - 1) * max(
            self._uv_extent[0] / max(extent[0], 1.0), self._uv_extent[1] / max(extent[1], 1.0)
        )

    def _grain_at(
        self,
        uv: tuple[NDArray[np.int16], NDArray[np.uint16]],
        extent: tuple[float, float],
        share: float = 1.0,
    ) -> tuple[NDArray[np.float32], float] | None:
        """A face-locked grain (see _grain_plane) drawn through the UV map ``uv`` (the
        texture's, as cv2.convertMaps' fixed-point pair) at the processing size,
        where the face's mesh spans ``extent`` (width, height) pixels, as float32
        luma around 0, and the share of a shortfall it makes up: ``share`` faded in
        over GRAIN_FACE_PX of the face's width; None where that leaves none.
        Its grains are about a pixel wide (two planes mixed, see below): sampled
        sparser, interpolation leaves the pixels that fall between grains smoother
        than those on them, a lattice across the face.

        A face drawn well above the processing size takes its grain at full
        resolution (see _fine_detail; the caller's ``share`` fades this one out as
        that one fades in): upsampled from here it would be blotches two to five
        pixels wide, where a frame's grain is finer."""
        fade = _ramp(max(extent), GRAIN_FACE_PX) * share
        if fade <= 0.0:
            return None
        texels_per_px = self._texels_per_px(extent)
        # Between two planes' spacings, both, mixed by where it lies between them (in
        # octaves): a video's face growing past one spacing does not switch its
        # grain from one frame to the next.
        octave = min(max(float(np.log2(max(texels_per_px, 1.0))), 0.0), 3.0)
        low = int(np.floor(octave))
        mix = octave - low

        def drawn(level: int) -> NDArray[np.float32]:
            plane = _grain_plane(self.options.uv_size, 1 << level)
            looked = cv2.remap(
                plane,
                uv[0],
                uv[1],
                cv2.INTER_LINEAR,
                borderMode=cv2.BORDER_CONSTANT,
                borderValue=128,
            )
            return np.asarray(cv2.subtract(looked, 128, dtype=cv2.CV_32F), np.float32)

        grain = drawn(low)
        if mix > 0.01 and low < 3:
            grain = cv2.addWeighted(grain, 1.0 - mix, drawn(low + 1), mix, 0.0)
        return grain, fade

    def _lay_creases(
        self,
        source: NDArray[np.float32],
        frame: Frame,
        target_face: Face,
        uv: tuple[NDArray[np.float32], NDArray[np.float32]],
    ) -> NDArray[np.float32]:
        """The source's skin with the creases of the target's expression (its skin's
        detail now against at rest, ``Face.rest_detail``) laid on it, as a change of
        log luma, so each crease darkens the source's skin by its own share, in the
        skin's own hue (see :mod:`faceweave.core.creases`). A small face's are faded
        out (CREASE_FACE_PX): under a pixel wide, its folds are the video's noise."""
        rest = target_face.rest_detail
        if rest is None or rest.ndim != 2 or rest.shape[0] != rest.shape[1]:
            return source
        strength = self.options.creases * _ramp(target_face.size, CREASE_FACE_PX)
        if strength <= 0.0:
            return source
        size = rest.shape[0]
        detail = creases.face_detail(frame, target_face.landmarks_478, self.model, size)
        zone = creases.crease_zone(self.model, size)
        if target_face.rest is not None:
            # Not where a turn squeezes the skin: its detail there is not its detail at rest.
            zone = zone * creases.facing(
                target_face.landmarks_478, target_face.rest, self.model, size
            )
        return self._laid(source, creases.expression_creases(detail, rest, zone, strength), uv)

    def _lay_smile_folds(
        self,
        source: NDArray[np.float32],
        crop: Frame,
        points: NDArray[np.float32],
        target_face: Face,
        uv: tuple[NDArray[np.float32], NDArray[np.float32]],
        target_width: float,
    ) -> NDArray[np.float32]:
        """In a still image (no skin at rest to read an expression against), a target
        (its face's mesh ``points`` in ``crop``, the processing size's) that smiles
        wider than the source (``target_width``: its mouth_width; see
        SMILE_FOLD_SIGMAS) gives the source's skin in the smile's band its own folds:
        where the target's detail there is darker than the source texture's, the
        source's skin darkens by SMILE_FOLD_SHARE of the difference (its own wrinkles
        stay). A neutral face drawn on a smile had cheeks without a fold, a mask's
        grin."""
        strength = (
            self.options.creases
            * SMILE_FOLD_SHARE
            * _ramp(target_width - self._smile_width, SMILE_WIDTH_GAP)
            * _ramp(target_width, SMILE_SOURCE_WIDTH)
            * _ramp(target_face.size, CREASE_FACE_PX)
        )
        if strength <= 0.0:
            return source
        size = creases.CREASE_SIZE
        detail = creases.face_detail(crop, points, self.model, size, SMILE_FOLD_SIGMAS)
        zone = _uv_fold_cheeks(self.model, size)
        detail = np.minimum(detail, self._fold_rest)
        return self._laid(
            source, creases.expression_creases(detail, self._fold_rest, zone, strength), uv
        )

    def _laid(
        self,
        source: NDArray[np.float32],
        change: NDArray[np.float32],
        uv: tuple[NDArray[np.float32], NDArray[np.float32]],
    ) -> NDArray[np.float32]:
        """``source`` with a face-space log-luma ``change`` (S, S) drawn through the
        processing size's UV map ``uv`` and laid on as a gain."""
        size = change.shape[0]
        to_crease = np.float32((size - 1) / (self.options.uv_size - 1))
        drawn = cv2.remap(
            change,
            uv[0] * to_crease,
            uv[1] * to_crease,
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
        )
        gain = cv2.exp(drawn)
        return np.asarray(cv2.multiply(source, cv2.merge([gain, gain, gain])), np.float32)

    def _fine_detail(
        self,
        uv: tuple[NDArray[np.float32], NDArray[np.float32]],
        texels_per_px: float,
        target_crop: Frame,
        share: NDArray[np.float32],
        skin_share: NDArray[np.float32],
        eye_points: NDArray[np.float32] | None,
        unsmile: float = 0.0,
    ) -> NDArray[np.int16] | None:
        """The source photo's detail finer than the processing size, and the grain that
        makes up what it leaves short of the target's (int16 luma to add at the crop's
        full resolution), for a face processed well below its size.

        ``uv`` is the processing size's UV map (u and v apart: a two-channel float
        resize is OpenCV's slow path, 5x the time); ``texels_per_px`` how many of the (S, S)
        texture's texels a crop pixel spans; ``share`` (full size) how much the output
        shows the source, ``skin_share`` (processing size) the same on skin. The fine
        texture is drawn at twice the texture's resolution, or at it when a pixel spans
        more than FINE_MAX_SPAN of the finer texels (a face under about 500 px: its
        finest band would alias). As :func:`_match_detail` does, the band is toned down
        towards the target's own in the same band on skin (the grain of the frame
        around the face) by ``detail``, never sharpened beyond the photo; what it
        leaves short of the target's level is made up, by ``detail`` too, with the
        grain of :func:`_grain_texture`, drawn through the same UV map. With
        ``eye_points`` (the output mesh in crop pixels) the eyeballs' detail in the
        same band goes where :meth:`_paint_eyes` drew them
        (:func:`faceweave.core.eyeball.eye_detail`).
        """
        levels = self._fine_levels
        if levels is None:
            return None
        texture = levels[0] if 2.0 * texels_per_px <= FINE_MAX_SPAN else levels[1]
        ch, cw = target_crop.shape[:2]
        to_texture = np.float32((texture.shape[0] - 1) / (self.options.uv_size - 1))
        u_full, v_full = (
            cv2.resize(m * to_texture, (cw, ch), interpolation=cv2.INTER_LINEAR) for m in uv
        )
        sampled = cv2.remap(
            texture,
            u_full,
            v_full,
            cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_CONSTANT,
            borderValue=(128, 128, 128, 128),
        )
        band = cv2.subtract(cv2.extractChannel(sampled, 0), 128, dtype=cv2.CV_16S)
        if unsmile > 0.0:
            # The smile's folds flattened by ``unsmile`` (see SMILE_WIDTH_GAP).
            flat = cv2.subtract(cv2.extractChannel(sampled, 2), 128, dtype=cv2.CV_16S)
            band = cv2.addWeighted(band, 1.0 - unsmile, flat, unsmile, 0.0, dtype=cv2.CV_16S)
        # The bands' typical size on skin: their median magnitude (an energy is the
        # target's feature edges' more than its grain's), at every sixth row and
        # column (a nearest-neighbour shrink costs a tenth of a strided copy).
        sparse = (max(cw // 6, 1), max(ch // 6, 1))

        def shrunk(image: NDArray[np.generic]) -> NDArray[np.generic]:
            return np.asarray(cv2.resize(image, sparse, interpolation=cv2.INTER_NEAREST))

        on = cv2.resize(skin_share, sparse, interpolation=cv2.INTER_LINEAR) > 0.5
        if int(on.sum()) < 16:
            return None
        # The target's detail in the same band (the fine texture's blur, in crop pixels).
        grey = cv2.cvtColor(target_crop, cv2.COLOR_BGR2GRAY).astype(np.float32)
        sigma = FINE_SIGMA / max(texels_per_px, 1e-3)
        tgt = np.abs(shrunk(_high_pass(grey, sigma)))
        target_level = float(np.median(tgt[on]))
        # The photo's, where it has any.
        src = np.abs(shrunk(band))
        own = on & (src != 0)
        photo_level = float(np.median(src[own])) if self._has_fine and own.sum() >= 16 else 0.0
        detail = self.options.detail
        gain = min(1.0, target_level / photo_level) ** detail if photo_level > 0 else 1.0
        # What the photo's detail leaves short of the target's (medians add as the
        # squares of a spread do) is made up with the face-locked grain.
        short = max(target_level**2 - (gain * photo_level) ** 2, 0.0) ** 0.5
        grain_gain = detail * short / GRAIN_SCALE
        if eye_points is not None and self._has_fine:
            for (loop, first, left, right), patch in zip(
                _eye_layout(self.model), self._eyes, strict=True
            ):
                if patch is None:
                    continue
                drawn = eyeball.eye_detail(
                    patch,
                    eye_points[loop],
                    eye_points[first : first + 5],
                    eye_points[[left, right]],
                    (ch, cw),
                    sigma,
                    gaze=self.options.gaze,
                )
                if drawn is not None:
                    region, detail_drawn = drawn
                    band[region] = cv2.add(band[region], detail_drawn, dtype=cv2.CV_16S)
        if grain_gain > 0.0:
            noise = cv2.subtract(cv2.extractChannel(sampled, 1), 128, dtype=cv2.CV_16S)
            band = cv2.addWeighted(band, gain, noise, grain_gain, 0.0, dtype=cv2.CV_32F)
            gain = 1.0
        return np.asarray(cv2.multiply(band, share, scale=gain, dtype=cv2.CV_16S), np.int16)


# The coarse grid's coverage is blurred by this many cells before it is upsampled to
# the processing size for the masks (see _outline_coverage): its edge then follows the
# mesh's outline, not the cells' staircase.
COVERAGE_BLUR = 1.0
COVERAGE_RAMP = (0.35, 0.65)


def _outline_coverage(covered: NDArray[np.float32], size: tuple[int, int]) -> NDArray[np.float32]:
    """The mesh's coverage of the coarse grid (0 or 1 per cell) at ``size`` (w, h), 0 to
    1 over a few pixels across its outline: the face mask's edge there. The grid's
    staircase is smoothed first (COVERAGE_BLUR): its cells are 3-4 pixels of the
    processing size, and upsampled as they were, where the face mask reaches the
    outline (a turned face's far cheek, foreshortened) the steps showed along the
    swapped face's edge. (The skin the colour, light and detail are measured on keeps
    the unsmoothed coverage.)"""
    smooth = cv2.GaussianBlur(covered, (0, 0), COVERAGE_BLUR)
    up = cv2.resize(smooth, size, interpolation=cv2.INTER_LINEAR)
    # Half way on the outline (where the smoothed coverage is 0.5), over about a cell:
    # the masks reach as far into the rim as they did unsmoothed.
    low, high = COVERAGE_RAMP
    scale = np.float32(1.0 / (high - low))
    # (np.minimum/maximum: np.clip's own overhead is most of its cost on these.)
    return np.asarray(np.minimum(np.maximum((up - low) * scale, 0.0), 1.0), np.float32)


# A target face's creases (see Swapper._lay_creases) fade in between these sizes (px):
# the band they are read in is a texel or two of a 128-texel face space, under a
# pixel on a face under 64 px.
CREASE_FACE_PX = (48.0, 96.0)


# A fold in the coarse raster's texture map (see _uv_folds): adjacent grid pixels whose
# texture coordinates differ by more than FOLD_STEP times the median step between
# neighbours, and by at least FOLD_MIN_TEXELS texels.
FOLD_STEP = 4.0
FOLD_MIN_TEXELS = 12.0


# Boxes round the eye and mouth openings (see _rewarp_detail) grow by this share of
# their size plus REWARP_DETAIL_PAD crop pixels; a box where the output shows under
# REWARP_DETAIL_MIN of the re-warped target is left as it is (the lids' edges of
# swapped eyes show about 0.07 of it).
REWARP_DETAIL_GROW = 0.25
REWARP_DETAIL_PAD = 3
REWARP_DETAIL_MIN = 0.25
# An opening under this area (over its width squared) is shut: a closed mouth's is
# about 0.001, an open one's 0.13-0.29, an open eye's about 0.25.
REWARP_DETAIL_MIN_OPEN = 0.02


def _rewarp_detail(
    target_crop: Frame,
    rewarped_proc: Frame,
    maps: NDArray[np.float32],
    shares: tuple[NDArray[np.float32], NDArray[np.float32], float],
    openings: list[NDArray[np.float32]],
    coarse: Frame | None,
) -> list[tuple[tuple[slice, slice], NDArray[np.int16]]]:
    """The full-resolution detail of the target's pixels that the output shows
    re-warped to its mesh (an open mouth's teeth and tongue, eyes it keeps): int16
    changes to add to the upsampled output in boxes of the crop, as ``(box, change)``.

    Inside the openings the output shows the target re-warped at the processing size
    (``rewarped_proc``, through the processing size's ``maps``), then upsampled: the
    teeth came out soft beside the frame's (the spread of their Laplacian 15 against
    the frame's 23, vid_p03 at 1.47x). Around each opening (``openings``: its loop's
    points in processing pixels) the crop itself is re-warped at full resolution,
    bicubic (bilinear's sub-pixel shifts softened the teeth about as much: 17), and
    its difference from the re-warped copy, upsampled as the composite upsamples,
    goes in by the share of the output that is the re-warped target. ``shares`` holds
    what makes that share up: the blend's mask and the source's share (processing
    size), and how much of the target is re-warped (see FUSION_REWARP). With
    ``coarse`` (the unwarped target upsampled: the composite has added the target's
    own detail, ``target_crop - coarse``, where the output shows the target) that
    detail is taken back out: it lay where the warp took the target from. Bicubic
    remapping is slow in OpenCV (2.2 ms for a whole 330 px crop), hence the boxes.
    """
    mask, alpha, rewarped = shares
    ph, pw = mask.shape[:2]
    ch, cw = target_crop.shape[:2]

    def shown(box: tuple[slice, slice]) -> NDArray[np.float32]:
        return np.asarray(mask[box] * (np.float32(1.0) - alpha[box]) * np.float32(rewarped))

    # Crop pixel -> processing pixel as cv2.resize aligns them (pixel centres); the
    # maps' positions are in processing pixels of the crop's corners.
    fx, fy = pw / cw, ph / ch
    to_crop = np.array([(cw - 1) / max(pw - 1, 1), (ch - 1) / max(ph - 1, 1)], np.float32)
    changes = []
    for points in openings:
        lo, hi = points.min(0), points.max(0)
        if cv2.contourArea(points) < REWARP_DETAIL_MIN_OPEN * float(hi[0] - lo[0]) ** 2:
            continue  # shut: nothing of the target shows through it
        grow = REWARP_DETAIL_GROW * (hi - lo) + REWARP_DETAIL_PAD * np.array([fx, fy])
        x0p, y0p = np.floor(np.maximum(lo - grow, 0.0)).astype(int)
        x1p, y1p = np.ceil(np.minimum(hi + grow, [pw - 1, ph - 1])).astype(int)
        if x1p - x0p < 2 or y1p - y0p < 2:
            continue
        if float(shown((slice(y0p, y1p + 1), slice(x0p, x1p + 1))).max()) < REWARP_DETAIL_MIN:
            continue
        bx0, by0 = int(x0p / fx), int(y0p / fy)
        bx1, by1 = min(cw, int(np.ceil((x1p + 1) / fx))), min(ch, int(np.ceil((y1p + 1) / fy)))
        xs = (np.arange(bx0, bx1, dtype=np.float32) + 0.5) * np.float32(fx) - 0.5
        ys = (np.arange(by0, by1, dtype=np.float32) + 0.5) * np.float32(fy) - 0.5
        # The processing pixels these read (cv2.remap needs contiguous images, and a
        # copy of the whole maps' two channels cost 0.7 ms).
        wx0, wy0 = max(int(xs[0]) - 1, 0), max(int(ys[0]) - 1, 0)
        wx1, wy1 = min(int(xs[-1]) + 3, pw), min(int(ys[-1]) + 3, ph)
        window = (slice(wy0, wy1), slice(wx0, wx1))
        grid_x = np.ascontiguousarray(np.broadcast_to(xs[None, :] - wx0, (ys.size, xs.size)))
        grid_y = np.ascontiguousarray(np.broadcast_to(ys[:, None] - wy0, (ys.size, xs.size)))

        def up(
            image: NDArray[np.generic],
            interpolation: int = cv2.INTER_LINEAR,
            window: tuple[slice, slice] = window,
            grid: tuple[NDArray[np.float32], NDArray[np.float32]] = (grid_x, grid_y),
        ) -> NDArray[np.generic]:
            part = np.ascontiguousarray(image[window])
            return np.asarray(
                cv2.remap(part, *grid, interpolation, borderMode=cv2.BORDER_REPLICATE)
            )

        at = np.asarray(up(maps[..., 2:4]), np.float32) * to_crop
        sharp = cv2.remap(
            target_crop,
            np.ascontiguousarray(at[..., 0]),
            np.ascontiguousarray(at[..., 1]),
            cv2.INTER_CUBIC,
            borderMode=cv2.BORDER_REPLICATE,
        )
        # (Upsampled as the composite upsamples the output.)
        change = cv2.subtract(sharp, up(rewarped_proc, COMPOSITE_UPSAMPLING), dtype=cv2.CV_16S)
        box = (slice(by0, by1), slice(bx0, bx1))
        if coarse is not None:
            change = cv2.subtract(
                change, cv2.subtract(target_crop[box], coarse[box], dtype=cv2.CV_16S)
            )
        weight = cv2.remap(
            shown(window), grid_x, grid_y, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE
        )
        changes.append(
            (box, cv2.multiply(change, cv2.merge([weight, weight, weight]), dtype=cv2.CV_16S))
        )
    return changes


def _uv_folds(maps: NDArray[np.float32], covered: NDArray[np.bool_]) -> NDArray[np.bool_] | None:
    """Grid pixels on a fold of the coarse raster's texture map, or None without one.

    Where one part of the face hides another (a turned head's nose over its far
    cheek), neighbouring grid pixels show texels far apart in the texture. Upsampled
    bilinearly, the pixels between took the texels in between, the hidden nose side's:
    a thin dark line down the nose of a turned target (the astronaut onto p18). Only
    pixels clear of the mesh's rim count (there a grid pixel's texel is an edge
    triangle's, extrapolated).
    """
    inner = cv2.erode(covered.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    u, v = maps[..., 0], maps[..., 1]
    across = np.abs(u[:, 1:] - u[:, :-1]) + np.abs(v[:, 1:] - v[:, :-1])
    down = np.abs(u[1:] - u[:-1]) + np.abs(v[1:] - v[:-1])
    pairs_across = inner[:, 1:] & inner[:, :-1]
    pairs_down = inner[1:] & inner[:-1]
    if int(pairs_across.sum()) < 16:
        return None
    typical = float(np.median(across[pairs_across][::3]))  # a third of them: as good, cheaper
    limit = max(FOLD_STEP * typical, FOLD_MIN_TEXELS)
    jump_across = pairs_across & (across > limit)
    jump_down = pairs_down & (down > limit)
    if not (jump_across.any() or jump_down.any()):
        return None
    folds = np.zeros(covered.shape, bool)
    folds[:, 1:] |= jump_across
    folds[:, :-1] |= jump_across
    folds[1:] |= jump_down
    folds[:-1] |= jump_down
    return folds


def _sharpen_folds(
    maps: NDArray[np.float32],
    folds: NDArray[np.bool_],
    raster: Raster,
    model: FaceModel,
    attributes: NDArray[np.float32],
    out_verts: NDArray[np.float32],
    origin: tuple[int, int],
    to_proc: NDArray[np.float32],
) -> None:
    """Redraw the upsampled maps (in place) at full resolution around the coarse
    raster's folds (_uv_folds): the triangles seen there are rasterised again at the
    processing size, nearer ones winning, and their attributes interpolated anew."""
    ph, pw = maps.shape[:2]
    band = cv2.dilate(folds.astype(np.uint8), np.ones((3, 3), np.uint8))
    seen = np.unique(raster.triangle[(band > 0) & (raster.triangle >= 0)])
    triangles = model.render_triangles[seen]
    points = (out_verts[:, :2] - np.array(origin, np.float32)) * to_proc
    redrawn = rasterize(points, triangles, (ph, pw), depth=out_verts[:, 2])
    where = (
        cv2.resize(band, (pw, ph), interpolation=cv2.INTER_NEAREST).astype(bool) & redrawn.covered
    )
    values = redrawn.interpolate(attributes, triangles)
    maps[where] = values[where]


def fine_fade(scale: float) -> float:
    """How much of the fine detail (see Swapper._fine_detail) a face processed at
    1/``scale`` of its size gets: none up to DETAIL_RESTORE_SCALE (the upsampled swap
    is composited as it is), all from FINE_FADE above it, smoothly between."""
    t = min(max((scale - DETAIL_RESTORE_SCALE) / FINE_FADE, 0.0), 1.0)
    return t * t * (3.0 - 2.0 * t)


def fusion_mix(fusion: float) -> float:
    """How far geometry and texture move towards the source at a given ``fusion``.

    Identity does not follow a linear mix: over 48 pairs of the development set (half
    of them pairs whose linear sweep was not monotonic), a 25% mix moved dlib's
    distance to the source only 13% of the way from the target's to the full swap's,
    and a 75% mix 81% (an S-curve: a partial face reads as the target until the
    source's features dominate). This odd cubic ``f + c f (1 - f)(1 - 2f)`` (``c =
    FUSION_EASE``) is the inverse S: it keeps 0, 1/2 and 1, and moves the quarter
    steps to about 0.33 and 0.67, so on the same pairs the four quarter steps moved
    22%, 22%, 28% and 28% of the way. Its slope stays finite at both ends (a fine
    step near 0 is a fine change) and positive everywhere (``c <= 2``).
    """
    f = min(max(float(fusion), 0.0), 1.0)
    return f + FUSION_EASE * f * (1.0 - f) * (1.0 - 2.0 * f)


def _keep_fused_detail(
    fused: NDArray[np.float32],
    source: NDArray[np.float32],
    target: NDArray[np.float32],
    alpha: NDArray[np.float32],
) -> NDArray[np.float32]:
    """``fused`` (``alpha`` of ``source`` over ``target``, float32 BGR at the
    processing size; ``source`` and ``target`` as their luma) with its two finest
    Laplacian bands raised, pixel by pixel, to the level that the two faces' bands
    mixed by ``alpha`` would have.

    Two faces' fine detail (pores, wrinkles, grain) lies in different places, so a
    weighted mean of them holds less of it than either: at an even mix about 0.7 of
    it (the root of 0.5^2 + 0.5^2). A fusion between 0 and 1 came out smoother than
    both the target and the full swap, and looked blurred: over 56 pairs of eight
    frontal photos, at fusion 0.25, 0.5 and 0.75 the output's finest band (luma
    less its 1-pixel blur, on the face) held 0.78, 0.75 and 0.80 of the level
    between the target's and the full swap's (weighted as the fusion mixes them),
    0.90, 0.86 and 0.91 with this. A band's level here is its root mean square over
    a Gaussian of FUSION_DETAIL_REACH pixels; the wanted level is ``alpha`` times
    the source's plus ``1 - alpha`` times the target's, and the fused band is
    scaled up to it, never down and at most FUSION_DETAIL_GAIN times. Where the two
    faces' detail coincides (the eyes' and lips' edges, aligned by the mesh) the mix
    keeps its level and gets no gain; the colour bands are scaled alike, so a
    detail keeps its hue. (Done again at full resolution for a face processed
    below its size, it took those to 0.94, 0.91 and 1.00, for 6 ms more a
    1080p frame.)
    """
    greys = [source, target]
    colour = fused
    bands: list[NDArray[np.float32]] = []
    gains: list[NDArray[np.float32]] = []
    share = alpha
    for _ in range(2):
        h, w = colour.shape[:2]
        if min(h, w) < 16:
            break
        share = cv2.pyrDown(share)  # the levels are measured at half the band's size
        levels = []
        for i, grey in enumerate(greys):
            band, greys[i] = _laplacian_step(grey)
            levels.append(_detail_level(band))
        band, colour = _laplacian_step(colour)
        bands.append(band)
        # The mix's luma band is its colour band's luma (both are linear).
        levels.append(_detail_level(cv2.cvtColor(band, cv2.COLOR_BGR2GRAY)))
        want = cv2.add(
            cv2.multiply(share, levels[0]),
            cv2.multiply(np.float32(1.0) - share, levels[1]),
        )
        gain = cv2.divide(want, cv2.max(levels[2], 0.5))
        gain = cv2.min(cv2.max(gain, 1.0), FUSION_DETAIL_GAIN) - np.float32(1.0)
        gains.append(cv2.pyrUp(gain, dstsize=(w, h)))
    # Coarsest band first: each is added, then the sum carried up to the next finer size.
    extra: NDArray[np.float32] | None = None
    for band, gain in zip(reversed(bands), reversed(gains), strict=True):
        h, w = band.shape[:2]
        add = cv2.multiply(band, cv2.merge([gain, gain, gain]))
        extra = add if extra is None else cv2.add(add, cv2.pyrUp(extra, dstsize=(w, h)))
    if extra is None:
        return fused
    return np.asarray(cv2.add(fused, extra), np.float32)


def _laplacian_step(image: NDArray[np.float32]) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """One level of a Laplacian pyramid: ``image`` less its Gaussian pyramid's next level
    drawn back up to its size (its finest band), and that next level."""
    down = cv2.pyrDown(image)
    size = (image.shape[1], image.shape[0])
    return np.asarray(cv2.subtract(image, cv2.pyrUp(down, dstsize=size)), np.float32), down


def _detail_level(band: NDArray[np.float32]) -> NDArray[np.float32]:
    """A band's local level at half its size: its root mean square over a Gaussian of
    FUSION_DETAIL_REACH of the band's pixels."""
    power = cv2.pyrDown(cv2.multiply(band, band))
    return np.asarray(
        cv2.sqrt(cv2.GaussianBlur(power, (0, 0), FUSION_DETAIL_REACH / 2.0)), np.float32
    )


def _glasses_frames(
    target: Frame,
    landmarks: NDArray[np.float32],
    uv_glasses: NDArray[np.uint8],
    uv_map: NDArray[np.int16],
    uv_frac: NDArray[np.uint16],
) -> NDArray[np.float32] | None:
    """Where the target's spectacle frames are (they stay in front of the swapped face),
    or None when it wears none.

    A frame is a thin line, darker (or, for metal, brighter) than the skin around it:
    a morphological black-hat (top-hat) about a quarter of an eye wide finds it. Between
    the inner eye corners, from a little below them up to half an eye above, a face
    without glasses is plain skin; with glasses the frame's bridge crosses it from side
    to side. The share of that region's columns spanned by one connected line decides,
    with a ramp between the two GLASSES_BRIDGE_CROSSED values (no on/off flicker in a
    video); frown lines, wrinkles and skin texture are short pieces. Only then is the
    band around the eyes (brows included, see UVMasks.glasses) looked up, and its line
    pixels are the frames.

    Args:
        target: the target crop (BGR).
        landmarks: (478, 2) the target's mesh in crop pixels.
        uv_glasses: UVMasks.glasses as bytes; uv_map, uv_frac: the crop's UV maps.
    """
    found = _glasses_bridge(target, landmarks)
    if found is None:
        return None
    strength, kernel = found
    # Frames lie within an eye width or so above and below the eyes: only those rows.
    eyes = landmarks[[33, 133, 362, 263, 159, 145, 386, 374], 1]
    reach = 1.2 * float(np.linalg.norm(landmarks[33] - landmarks[133]))
    h = target.shape[0]
    y0, y1 = max(0, int(eyes.min() - reach)), min(h, int(np.ceil(eyes.max() + reach)) + 1)
    if y1 - y0 < 3:
        return None
    rows = slice(y0, y1)
    band = cv2.remap(uv_glasses, uv_map[rows], uv_frac[rows], cv2.INTER_LINEAR) > 127
    frames = (_line_contrast(target[rows], kernel) > GLASSES_LINE_CONTRAST) & band
    grown = cv2.dilate(frames.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(np.float32)
    out = np.zeros(target.shape[:2], np.float32)
    out[rows] = cv2.GaussianBlur(grown, (3, 3), 0) * strength
    return out


# Tinted lenses on a target (see _tinted_lenses), told by the lower half of the ring
# 0.1-0.35 eye widths off each eye opening (a lens covers it; eye shadow, on the lid
# above, does not: strong blue, purple or smoky shadow drawn on the astronaut's lids
# reads as none). Its tint against the face's skin (OpenCV's 8-bit Lab): a shaded
# socket is darker and greyer than the skin (its chroma shrinks along the skin's own
# hue), a lens turns the hue or deepens it. On the development photos' faces without
# lenses that tint is 0-6.4 (Grace Hopper's frames the most), in every other frame of
# their videos 0-4.5; p25's pink lenses 22. Behind a lens the opening often reads as
# flat (eyes_seen's span), as closed or downcast eyes do (p18, p24, a video's blinks):
# a flat opening takes a weaker tint. And its lightness under the cheek's straight
# below the eye, the lesser of the two eyes (a half-face in shadow darkens both): 13
# L levels at most on the development photos, 33 in the videos' frames (p02's
# downcast eyes under deep brows); the tests' dark and grey lenses 84-103.
LENS_TINT = (9.0, 13.0)  # the ring's tint, opening flat: none .. a lens
LENS_TINT_SEEN = (12.0, 16.0)  # the same, eyes seen
LENS_DARK = (45.0, 58.0)  # the ring's lightness under the cheek's: none .. a lens
LENS_RING = (0.1, 0.35)  # eye widths off the opening where the tint is measured
LENS_REACH = 0.9  # eye widths off the opening where lens pixels are looked for
LENS_CHEEK = (1.0, 1.5)  # eye widths off the opening, below it: the cheek's lightness
LENS_RIM = 0.12  # eye widths a lens is grown by, for its rim
LENS_BRIDGE_CONTRAST = 10.0  # grey levels of a line joining two lenses (see _lens_bridge)
LENS_EYE_SAMPLES = 9  # pixels read along each opening's middle
_LENS_ALONG_EYES = np.linspace(0.15, 0.85, LENS_EYE_SAMPLES, dtype=np.float32)[:, None]
LENS_MIN_FACE_PX = 40.0  # as EYES_MIN_FACE_PX: fewer pixels cannot tell


def _source_lenses(
    image: Frame,
    face: Face,
    texture: NDArray[np.float32],
    model: FaceModel,
    map_xy: NDArray[np.float32],
    seen: NDArray[np.bool_],
) -> NDArray[np.float32] | None:
    """Where a source photo's tinted or dark lenses are, in its texture (S, S), 0..1
    (see _tinted_lenses); None without lenses. Found on the face's box grown by half,
    with the skin's mean colour from the texture."""
    if face.size < LENS_MIN_FACE_PX:
        return None
    x0, y0, x1, y1 = face.bbox
    grow = 0.5 * max(x1 - x0, y1 - y0)
    h, w = image.shape[:2]
    left, top = max(int(x0 - grow), 0), max(int(y0 - grow), 0)
    right, bottom = min(int(x1 + grow) + 1, w), min(int(y1 + grow) + 1, h)
    skin = _uv_skin(model, texture.shape[0]) & seen
    if right - left < 8 or bottom - top < 8 or np.count_nonzero(skin) < 32:
        return None
    skin_bgr = np.asarray(texture[skin].mean(axis=0), np.float32)
    crop = np.ascontiguousarray(image[top:bottom, left:right])
    landmarks = (face.landmarks_478[:, :2] - np.array([left, top])).astype(np.float32)
    found = _tinted_lenses(crop, landmarks, skin_bgr)
    if found is None:
        return None
    lenses = cv2.remap(
        found,
        (map_xy[..., 0] - left).astype(np.float32),
        (map_xy[..., 1] - top).astype(np.float32),
        cv2.INTER_LINEAR,
        borderMode=cv2.BORDER_CONSTANT,
    )
    # A texel filled from the other side's may come from the other lens.
    return np.asarray(np.maximum(lenses, lenses[:, ::-1]), np.float32)


@functools.lru_cache(maxsize=2)
def _lens_vertices(model: FaceModel) -> tuple[NDArray[np.intp], ...]:
    """The mesh vertices around each eye on the canonical face: for the image-left eye
    and the image-right one, those LENS_RING eye widths off its opening and below its
    middle, then those on the cheek below it, LENS_CHEEK eye widths off, then the
    ring's upper half (read-only)."""
    canonical = model.canonical[:N_MESH, :2].astype(np.float32)
    rings, cheeks, uppers = [], [], []
    for name in ("left_eye", "right_eye"):
        points = canonical[model.regions[name]]
        width = float(points[:, 0].max() - points[:, 0].min())
        hull = cv2.convexHull(points)
        off = np.array(
            [-cv2.pointPolygonTest(hull, (float(x), float(y)), True) for x, y in canonical]
        )
        # y grows towards the mouth. The ring's lower half tells a lens: a lens covers
        # it, and eye shadow, on the lids above, does not. The cheek is taken straight
        # below the opening (off the nostrils' shade).
        lower = canonical[:, 1] > points[:, 1].mean()
        under = (canonical[:, 0] > points[:, 0].min()) & (canonical[:, 0] < points[:, 0].max())
        below = under & (canonical[:, 1] > points[:, 1].max())
        ring = (off > LENS_RING[0] * width) & (off < LENS_RING[1] * width)
        rings.append(np.flatnonzero(lower & ring))
        uppers.append(np.flatnonzero(~lower & ring))
        cheeks.append(
            np.flatnonzero(below & (off > LENS_CHEEK[0] * width) & (off < LENS_CHEEK[1] * width))
        )
    vertices = tuple(rings + cheeks + uppers)
    for v in vertices:
        v.setflags(write=False)
    return vertices


@functools.lru_cache(maxsize=2)
def _lens_bounds(model: FaceModel) -> tuple[int, ...]:
    """Where each of _lens_vertices' groups starts in _tinted_lenses' samples, after
    the two openings' LENS_EYE_SAMPLES each, and where the last ends."""
    sizes = [len(group) for group in _lens_vertices(model)]
    return tuple(int(b) for b in np.cumsum([2 * LENS_EYE_SAMPLES, *sizes]))


def _middle(values: NDArray[np.uint8]) -> NDArray[np.float32]:
    """The median of each column of a few dozen rows (the upper one of an even count; a
    sort is cheaper than np.median's overhead on so few)."""
    return np.sort(values, axis=0)[len(values) // 2].astype(np.float32)


def _span(values: NDArray[np.uint8]) -> float:
    """The 5th to 95th percentile span of a few values (a sort is cheaper than
    np.percentile's overhead on so few)."""
    ordered = np.sort(values)
    n = len(ordered) - 1
    return float(ordered[int(0.95 * n)]) - float(ordered[int(0.05 * n)])


def _eye_crops(
    image: Frame, landmarks: NDArray[np.float32], reach: float
) -> list[tuple[tuple[int, int, int, int], NDArray[np.float32], Frame, float]]:
    """Each eye's box reaching ``reach`` eye widths past its opening (x0, y0, x1, y1),
    with the distance from the opening in eye widths and the Lab pixels in that box,
    and the eye's width in pixels; eyes too small or out of the image are left out."""
    model = load_face_model()
    h, w = image.shape[:2]
    eyes = []
    for name in ("left_eye", "right_eye"):
        points = np.asarray(landmarks[model.regions[name]], np.float32)
        width = float(points[:, 0].max() - points[:, 0].min())
        pad = reach * width + 2.0
        x0, y0 = np.maximum(np.floor(points.min(0) - pad).astype(int), 0)
        x1, y1 = np.minimum(np.ceil(points.max(0) + pad).astype(int) + 1, (w, h))
        if width < 3.0 or x1 - x0 < 3 or y1 - y0 < 3:
            continue
        opening = np.zeros((y1 - y0, x1 - x0), np.uint8)
        hull = cv2.convexHull(points - np.array([x0, y0], np.float32)).astype(np.int32)
        cv2.fillConvexPoly(opening, hull, 1)
        away = cv2.distanceTransform(1 - opening, cv2.DIST_L2, 3) / np.float32(width)
        lab = cv2.cvtColor(np.ascontiguousarray(image[y0:y1, x0:x1]), cv2.COLOR_BGR2Lab)
        eyes.append(((int(x0), int(y0), int(x1), int(y1)), away, lab, width))
    return eyes


def _tinted_lenses(
    target: Frame, landmarks: NDArray[np.float32], skin_bgr: NDArray[np.float32] | None
) -> NDArray[np.float32] | None:
    """Where the target's tinted or dark lenses are (they stay in front of the swapped
    face, as a spectacle frame does), 0..1, or None when it wears none.

    A lens tints the skin below each eye opening and darkens it: that ring's median
    colour against the face's skin, and its lightness against the cheek further down,
    decide (see LENS_TINT); a weaker tint does where the openings show one flat tone,
    as behind most lenses. A closed eye is flat too but has skin around it, a clear
    lens (Grace Hopper's) no tint. The lens is then the pixels within LENS_REACH eye
    widths of each opening nearer in colour to the ring below or above it than to the
    skin (the pieces that touch the ring), filled to their convex hull and grown by a
    rim; feathered, and weighted by how sure the tests are (ramps, not a switch: no
    flicker in a video).

    Args:
        target: the target crop (BGR).
        landmarks: (478, 2) the target's mesh in crop pixels.
        skin_bgr: the mean colour of the target's skin (see _target_occluders).
    """
    if skin_bgr is None:
        return None
    h, w = target.shape[:2]
    model = load_face_model()
    # Pixels sampled along each opening's middle (across white, iris and white when
    # open), and at the mesh's vertices on the ring around it and on the cheek below
    # (about 40 an eye): a few dozen pixels tell what the thousands would, for a
    # fraction of the cost.
    along_eyes = _LENS_ALONG_EYES
    corners = landmarks[[33, 133, 362, 263], :2]
    groups = _lens_vertices(model)
    samples = np.concatenate(
        [
            corners[0] + along_eyes * (corners[1] - corners[0]),
            corners[2] + along_eyes * (corners[3] - corners[2]),
            *(landmarks[g, :2] for g in groups),
        ]
    )
    at = np.rint(samples).astype(np.intp)
    inside = (at[:, 0] >= 0) & (at[:, 0] < w) & (at[:, 1] >= 0) & (at[:, 1] < h)
    if not inside.all():
        return None  # an eye at the crop's edge: too little to tell
    lab = cv2.cvtColor(target[at[:, 1], at[:, 0]][:, None], cv2.COLOR_BGR2Lab)[:, 0]
    n = LENS_EYE_SAMPLES
    spans = [_span(lab[:n, 0]), _span(lab[n : 2 * n, 0])]
    ring_l, ring_r, cheek_l, cheek_r, upper_l, upper_r = (
        lab[i:j] for i, j in itertools.pairwise(_lens_bounds(model))
    )
    ring = lab[2 * n : 2 * n + len(ring_l) + len(ring_r)]
    ring_mid = _middle(ring)
    skin_lab = cv2.cvtColor(
        np.clip(skin_bgr, 0, 255).astype(np.uint8).reshape(1, 1, 3), cv2.COLOR_BGR2Lab
    )
    skin_mid = skin_lab.reshape(3).astype(np.float32)
    # Darkness against the cheek below each eye: a half-face in shadow (p18's low-key
    # light) darkens both alike; a lens only the eye. Both eyes must be darker.
    darker = min(
        float(_middle(cheek)[0] - max(_middle(below)[0], _middle(above)[0]))
        for below, above, cheek in ((ring_l, upper_l, cheek_l), (ring_r, upper_r, cheek_r))
    )
    hue_a, hue_b = float(skin_mid[1]) - 128.0, float(skin_mid[2]) - 128.0
    chroma = max(math.hypot(hue_a, hue_b), 1.0)
    off_a, off_b = float(ring_mid[1] - skin_mid[1]), float(ring_mid[2] - skin_mid[2])
    along = (off_a * hue_a + off_b * hue_b) / chroma
    across = abs(off_b * hue_a - off_a * hue_b) / chroma
    tint = math.hypot(across, max(along, 0.0))
    flat = 1.0 - _ramp(float(np.mean(spans)), EYES_SEEN_RANGE)
    sure = max(flat * _ramp(tint, LENS_TINT), _ramp(tint, LENS_TINT_SEEN), _ramp(darker, LENS_DARK))
    if sure <= 0.0:
        return None
    # The lens's colours: below the eye and above it (a lens over darker lids).
    upper_mid = _middle(np.concatenate([upper_l, upper_r]))
    out = np.zeros((h, w), np.float32)
    eyes = _eye_crops(target, landmarks, LENS_REACH)
    if not eyes:
        return None
    for (x0, y0, x1, y1), away, lab, width in eyes:
        pixels = lab.astype(np.float32)
        to_skin = np.sum((pixels - skin_mid) ** 2, axis=2)
        nearer = (np.sum((pixels - ring_mid) ** 2, axis=2) < to_skin) | (
            np.sum((pixels - upper_mid) ** 2, axis=2) < to_skin
        )
        core = away < LENS_RING[1]
        lens = cv2.morphologyEx(
            (nearer & (away < LENS_REACH)).astype(np.uint8),
            cv2.MORPH_OPEN,
            np.ones((3, 3), np.uint8),
        )
        # Only the lens around this opening: the pieces that touch its core.
        piece = _joined(lens > 0, core).astype(np.uint8)
        if not piece.any():
            continue  # the opening lies past the crop's edge
        # A lens is convex, and its rim (metal, or the tint's darker edge) reads as
        # neither colour: the hull of the piece, grown by a rim's width.
        cv2.fillConvexPoly(piece, cv2.convexHull(cv2.findNonZero(piece)), 1)
        rim = 2 * int(round(LENS_RIM * width)) + 1
        piece = cv2.dilate(piece, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (rim, rim)))
        out[y0:y1, x0:x1] = np.maximum(out[y0:y1, x0:x1], piece.astype(np.float32))
    width = float(np.mean([e[3] for e in eyes]))
    if len(eyes) == 2:
        out = np.maximum(out, _lens_bridge(target, out, width))
    sigma = max(0.06 * width, 0.8)
    return np.asarray(cv2.GaussianBlur(out, (0, 0), sigma) * sure, np.float32)


def _lens_bridge(target: Frame, lenses: NDArray[np.float32], width: float) -> NDArray[np.float32]:
    """The bridge between two lenses: thin lines (see _line_contrast) in the gap
    between them, from the lenses' tops down to their middles, that touch both."""
    out = np.zeros_like(lenses)
    columns = np.flatnonzero(lenses.max(axis=0) > 0)
    rows = np.flatnonzero(lenses.max(axis=1) > 0)
    if len(columns) < 2 or len(rows) < 2:
        return out
    # The gap: the longest run of empty columns between the lenses.
    gaps = np.flatnonzero(np.diff(columns) > 1)
    if len(gaps) == 0:
        return out
    widest = gaps[np.argmax(np.diff(columns)[gaps])]
    pad = int(round(LENS_RIM * width)) + 1
    x0, x1 = int(columns[widest]) - pad, int(columns[widest + 1]) + pad + 1
    y0, y1 = int(rows[0]), int((rows[0] + rows[-1]) // 2) + 1
    x0, x1 = max(x0, 0), min(x1, target.shape[1])
    if x1 - x0 < 3 or y1 - y0 < 3:
        return out
    k = max(3, int(round(0.25 * width)) | 1)
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    # A line that joins two lenses is a bridge even when faint (a thin metal one).
    contrast = _line_contrast(target[y0:y1, x0:x1], kernel)
    lines = (contrast > LENS_BRIDGE_CONTRAST).astype(np.uint8)
    near = cv2.dilate((lenses[y0:y1, x0:x1] > 0).astype(np.uint8), np.ones((3, 3), np.uint8))
    _, labels = cv2.connectedComponents(lines | near)
    # The lenses join the line pieces that touch them: a component holding both lenses'
    # edges crosses the gap.
    left = labels[:, 0][labels[:, 0] > 0]
    right = labels[:, -1][labels[:, -1] > 0]
    both = np.intersect1d(left, right)
    if len(both) == 0:
        return out
    bridge = np.isin(labels, both) & (lines > 0)
    out[y0:y1, x0:x1] = cv2.dilate(bridge.astype(np.uint8), np.ones((3, 3), np.uint8))
    return out


def _glasses_bridge(
    image: Frame, landmarks: NDArray[np.float32]
) -> tuple[float, NDArray[np.uint8]] | None:
    """How sure (0..1] that the face wears glasses, and the line kernel for its frames;
    None when it does not (see _glasses_frames)."""
    left, right = landmarks[133].astype(np.float64), landmarks[362].astype(np.float64)
    if left[0] > right[0]:
        left, right = right, left
    across = right - left
    eye_width = float(np.linalg.norm(landmarks[33] - landmarks[133]))
    if float(np.linalg.norm(across)) < 4.0 or eye_width < 4.0:
        return None
    up = np.array([across[1], -across[0]]) / np.linalg.norm(across)
    if np.dot(up, landmarks[168] - (left + right) / 2) < 0:  # towards the brows
        up = -up
    a, b = left + 0.12 * across, right - 0.12 * across
    low, high = -0.2 * eye_width * up, 0.5 * eye_width * up
    quad = np.array([a + low, b + low, b + high, a + high])
    k = int(max(3, round(0.25 * eye_width))) | 1
    h, w = image.shape[:2]
    x0, y0 = np.floor(quad.min(0)).astype(int) - k
    x1, y1 = np.ceil(quad.max(0)).astype(int) + k + 1
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    if x1 - x0 < 2 * k or y1 - y0 < 2 * k:
        return None
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k, k))
    bridge = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillPoly(bridge, [np.round(quad - [x0, y0]).astype(np.int32)], 1)
    on_bridge = bridge > 0
    columns = on_bridge.sum(0) >= 3
    if int(columns.sum()) < 3:
        return None
    crossing = _line_contrast(image[y0:y1, x0:x1], kernel) > GLASSES_BRIDGE_CONTRAST
    # The columns spanned by the widest single line: a frame's bridge is one bar across
    # the nose, where wrinkles, frown lines and skin texture are many short pieces.
    count, labels = cv2.connectedComponents((crossing & on_bridge).astype(np.uint8))
    crossed = 0.0
    for label in range(1, count):
        spanned = (labels == label).any(0) & columns
        crossed = max(crossed, float(spanned.sum()) / float(columns.sum()))
    start, full = GLASSES_BRIDGE_CROSSED
    strength = float(np.clip((crossed - start) / (full - start), 0.0, 1.0))
    return (strength, kernel) if strength > 0.0 else None


def _line_contrast(image: Frame, kernel: NDArray[np.uint8]) -> NDArray[np.float32]:
    """How far each pixel is on a thin dark line (black-hat) or, weighted 0.7, a thin
    bright one (top-hat, metal frames) narrower than ``kernel``."""
    grey = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
    dark = cv2.morphologyEx(grey, cv2.MORPH_BLACKHAT, kernel)
    bright = cv2.morphologyEx(grey, cv2.MORPH_TOPHAT, kernel)
    return np.maximum(dark.astype(np.float32), 0.7 * bright)


# A turned target's background (see _target_occluders): past TARGET_DARK_YAW[0] degrees
# (in full from [1]), pixels darker than TARGET_DARK[0] of the skin's median grey
# (fully under [1]) are no face where the edge zone reaches (its weight times
# TARGET_DARK_EDGE, up to 1). The colour test alone let the night behind the profile
# p15 through (its skin's spread, a lit cheek to a shaded jaw, reaches near black): the
# mesh, reading the profile at 55 degrees, overhangs the nose bridge, and every swap
# onto it drew a skin-coloured haze there.
TARGET_DARK = (0.45, 0.3)
TARGET_DARK_EDGE = 2.0
TARGET_DARK_YAW = (30.0, 40.0)


def _target_occluders(
    target_small: Frame,
    skin: NDArray[np.floating],
    edge: NDArray[np.float32],
    cheeks: NDArray[np.floating] | None = None,
    forehead: NDArray[np.float32] | None = None,
    turn: float = 0.0,
    target: Frame | None = None,
) -> tuple[NDArray[np.float32], float, NDArray[np.float32] | None]:
    """Near the face's edge, target pixels far from the target's skin colour are not face:
    background past a turned head's silhouette, hair over the forehead, a hand. They
    stay the target's. Computed on ``target_small``, the target crop shrunk to the
    coarse grid, and upsampled to ``edge``'s size (it is smooth).

    A fringe reaches further in, down to the brows, where ``edge`` has faded: on the
    ``forehead`` (0..1) pixels darker than the skin and off its colour as measured on
    the ``cheeks`` (below the eyes, where no fringe hangs) count too (FOREHEAD_Z,
    FOREHEAD_DARK); lone pixels and thin lines (wrinkles) do not. A fringe's lower
    strands had been painted over with the source's forehead. (Both masks on the
    coarse grid, or resized to it.)

    A turned head (``turn``, 0..1: see TARGET_DARK_YAW) also keeps the pixels of
    ``target`` (the crop at ``edge``'s size) much darker than its skin in the edge zone:
    the background its fitted mesh overhangs (see TARGET_DARK).

    Returns:
        The occluders, the colourfulness of the target's skin
        (:func:`faceweave.core.color.colourfulness`; 1 where too little skin shows),
        and its mean colour (BGR; None where too little skin shows).
    """
    h, w = edge.shape[:2]
    grid = (target_small.shape[1], target_small.shape[0])
    small = target_small.astype(np.float32)
    skin_small = cv2.resize(
        np.ascontiguousarray(skin, np.float32), grid, interpolation=cv2.INTER_AREA
    )
    pixels = small[skin_small > 0.9]
    if len(pixels) < 32:
        return np.zeros((h, w), np.float32), 1.0, None
    cov, mean = _pixel_stats(pixels)
    occl = _ramps(_skin_distance(small, cov, mean), (3.5, 5.5))
    occl = cv2.GaussianBlur(occl, (3, 3), 0)
    occl = np.asarray(cv2.resize(occl, (w, h), interpolation=cv2.INTER_LINEAR) * edge, np.float32)
    if turn > 0.0 and target is not None:
        # The skin's median grey, from the skin pixels gathered above.
        typical = float(np.median(cv2.cvtColor(pixels.reshape(-1, 1, 3), cv2.COLOR_BGR2GRAY)))
        lo, hi = TARGET_DARK
        grey = cv2.cvtColor(target, cv2.COLOR_BGR2GRAY).astype(np.float32)
        dark = np.clip((lo * typical - grey) / max((lo - hi) * typical, 1e-3), 0.0, 1.0)
        dark = cv2.GaussianBlur(dark, (3, 3), 0)
        occl = np.maximum(occl, dark * np.minimum(edge * TARGET_DARK_EDGE, 1.0) * np.float32(turn))
    if cheeks is not None and forehead is not None and float(forehead.max()) > 0.0:
        fringe = _forehead_fringe(small, cheeks, forehead, cov, mean, grid)
        if fringe is not None:
            occl = np.maximum(occl, cv2.resize(fringe, (w, h), interpolation=cv2.INTER_LINEAR))
    return occl, color_ops.colourfulness(cov), mean.astype(np.float32).reshape(3)


# What lies far off the target skin's hue anywhere on its face (see _off_skin): the
# distance of a pixel's chroma (Cr, Cb of YCrCb) from the skin's median, in units of
# the skin's own spread (1.4826 times its median absolute deviation, plus OFF_SKIN_FLOOR
# levels), counted from OFF_SKIN_Z[0], in full from OFF_SKIN_Z[1]. A flush, a shadow or
# a highlight keeps the skin's hue; a green, blue or red object does not.
OFF_SKIN_Z = (5.0, 7.0)
OFF_SKIN_FLOOR = 2.0
# ...and none of it where that would leave out over this share of the skin.
OFF_SKIN_MOST = 0.3


def _off_skin(
    target_small: Frame, skin: NDArray[np.floating], size: tuple[int, int]
) -> NDArray[np.float32] | None:
    """How far off the skin's hue each pixel of the face is (0..1, see OFF_SKIN_Z), at
    ``size`` (width, height), from ``target_small`` (the target crop on the coarse grid)
    and ``skin`` (at any size); None where nothing is (or too little skin shows)."""
    grid = (target_small.shape[1], target_small.shape[0])
    inside = cv2.resize(np.ascontiguousarray(skin, np.float32), grid, interpolation=cv2.INTER_AREA)
    chroma = cv2.cvtColor(target_small, cv2.COLOR_BGR2YCrCb)[..., 1:].astype(np.float32)
    samples = chroma[inside > 0.9]
    if len(samples) < 32:
        return None
    middle = np.median(samples, axis=0)
    spread = 1.4826 * np.median(np.abs(samples - middle), axis=0) + OFF_SKIN_FLOOR
    z = np.sqrt((((chroma - middle) / spread.astype(np.float32)) ** 2).sum(axis=2))
    off = _ramps(z, OFF_SKIN_Z) * (inside > 0.0)
    if not off.any() or float(off[inside > 0.9].mean()) > OFF_SKIN_MOST:
        # (Off the median's hue on most of the skin: no one hue to tell the skin by.)
        return None
    return np.asarray(cv2.resize(off, size, interpolation=cv2.INTER_LINEAR), np.float32)


# What a target wears or grows over its lower face (see _target_beard): on the lower face
# (below the nose's tip, BEARD_BELOW canonical units, fading in over BEARD_FADE; clear of
# the lips and the nose), pixels off the skin's colour as measured on the upper cheeks
# (between BEARD_UPPER's heights) by BEARD_Z (Mahalanobis, as _target_occluders: a grey
# or white beard, a face mask; not a bare hand, nor a beard dyed the skin's hue),
# kept where they cover at least BEARD_SHARE[0] of the lower face, in full from
# BEARD_SHARE[1] (not a shadow, a mole or a few dark hairs; and a beard that comes and
# goes about that share in a video fades).
# A dark beard on the skin's own hue lies within the skin's spread of grey and is not
# told from the skin's shading: it is painted over as before.
BEARD_BELOW = 0.11
BEARD_FADE = 0.12
BEARD_UPPER = (-0.42, 0.05)
BEARD_Z = (3.0, 5.0)
BEARD_SHARE = (0.25, 0.35)
# Over the lips too where they are the colour of what covers the rest (a face mask's;
# not a beard's lips): within BEARD_LIPS_NEAR grey levels (BGR distance) of its median
# colour, in full, out to BEARD_LIPS_NEAR[1].
BEARD_LIPS_NEAR = (20.0, 40.0)
# Skin in another light (a warm light on the lower face, a flush, a tan line) is off the
# upper skin's colour too, but along its hue and at least as saturated: pixels within
# BEARD_HUE degrees of the skin's hue (a-b, Lab), their chroma over BEARD_CHROMA of the
# skin's (ramp), do not count. A beard is greyer, a mask another hue.
BEARD_HUE = (20.0, 35.0)
BEARD_CHROMA = (0.5, 0.8)
# A cover over the upper cheeks too (a surgical mask up to the nose's bridge) leaves
# them no skin to measure: where their colour is off the forehead's middle (above
# FOREHEAD_ABOVE_BROWS, within BEARD_FOREHEAD_X of the midline) by BEARD_Z[0] or more,
# not along its hue, the forehead is the skin, and the cover is looked for from
# BEARD_MID_FACE (canonical height, just below the lower lids; nose included) down.
BEARD_FOREHEAD_X = 0.5
BEARD_MID_FACE = (-0.42, -0.36)
# ...and only where the forehead's median colour looks like skin and the cheeks' does
# not (Cr and Cb of YCrCb within SKIN_CR, SKIN_CB, as in Chai and Ngan's skin detector;
# Y over SKIN_Y_MIN): a dark fringe over the forehead is no skin, nor is a black-and-
# white photo's grey, and a face mask (pale blue, white, black) is none either.
SKIN_CR = (133.0, 173.0)
SKIN_CB = (77.0, 127.0)
SKIN_Y_MIN = 40.0


@functools.lru_cache(maxsize=4)
def _uv_beard_zones(model: FaceModel, size: int) -> NDArray[np.uint8]:
    """(S, S, 5) uint8: 255 on the upper cheeks' skin (where a target's skin is measured
    for its beard), the lower face where a beard may grow, fading in below the nose's
    tip (see BEARD_BELOW), clear of the lips and the nose, the lips with the band round
    them, the forehead's middle (the skin measured when the upper cheeks are covered)
    and the face below the lower lids, clear of the lips (where a cover over the upper
    cheeks is looked for; see BEARD_MID_FACE) (read-only)."""
    raster = model.uv_raster(size)
    on_nose = _uv_triangles_within(model, size, np.asarray(model.regions["nose"]))
    y = _uv_y(model, size)
    upper = _uv_skin(model, size) & ~on_nose & (y > BEARD_UPPER[0]) & (y < BEARD_UPPER[1])
    below = np.clip((y - BEARD_BELOW) / BEARD_FADE, 0.0, 1.0) * (raster.covered & ~on_nose)
    lips = _uv_lips_band(model, size)
    lower = below * (1.0 - lips)
    forehead = (_uv_forehead(model, size) > 0.5) & (np.abs(_uv_x(model, size)) < BEARD_FOREHEAD_X)
    start, full = BEARD_MID_FACE
    mid = np.clip((y - start) / (full - start), 0.0, 1.0) * raster.covered * (1.0 - lips)
    planes = [upper.astype(np.float32), lower, lips, forehead.astype(np.float32), mid]
    zones = np.round(np.dstack(planes) * 255.0).astype(np.uint8)
    zones.setflags(write=False)
    return zones


def _target_beard(
    small: NDArray[np.generic], zones: NDArray[np.uint8]
) -> NDArray[np.float32] | None:
    """What covers the target's lower face off its skin's colour (a grey beard, a face
    mask) on the coarse grid, 0..1, or None: too little upper skin to measure its
    colour on, or too little of the lower face off it (see BEARD_Z, BEARD_SHARE). When
    the upper cheeks are covered too (a surgical mask), the forehead's middle is the
    skin and the cover is looked for from below the lower lids (see BEARD_MID_FACE).
    ``small`` is the target on the grid, ``zones`` its _uv_beard_zones there."""
    image = np.asarray(small, np.float32)
    upper = zones[..., 0] > 127
    lower = zones[..., 1].astype(np.float32) * np.float32(1 / 255)
    pixels = image[upper]
    if len(pixels) < 16 or float(lower.sum()) < 16.0:
        return None
    cov, mean = _pixel_stats(pixels)
    off = _ramps(_skin_distance(image, cov, mean), BEARD_Z)
    # The upper cheeks covered too? (Their median colour is skin-like on nearly every
    # face, which ends the question.)
    cheeks = np.median(pixels, axis=0).astype(np.float32).reshape(1, 1, 3)
    forehead = zones[..., 3] > 127
    if not _skin_like(cheeks) and int(forehead.sum()) >= 16:
        brow = np.median(image[forehead], axis=0).astype(np.float32).reshape(1, 1, 3)
        cov_f, mean_f = _pixel_stats(image[forehead])
        if (
            _skin_like(brow)
            and float(_skin_distance(cheeks, cov_f, mean_f)[0, 0]) >= BEARD_Z[0]
            and float(_off_hue(_texture_lab(cheeks), _texture_lab(brow)[0, 0, 1:])[0, 0]) > 0.5
        ):
            lower = zones[..., 4].astype(np.float32) * np.float32(1 / 255)
            upper, cov, mean = forehead, cov_f, mean_f
            off = _ramps(_skin_distance(image, cov, mean), BEARD_Z)
    if float((off * lower).sum()) <= BEARD_SHARE[0] * float(lower.sum()):
        return None  # (the usual case, at the least cost: what follows only takes away)
    # Not skin in another light: along the skin's hue, as saturated or more.
    lab = _texture_lab(image)
    off *= _off_hue(lab, np.median(lab[upper][:, 1:], axis=0))
    share = _ramp(float((off * lower).sum()) / float(lower.sum()), BEARD_SHARE)
    if share <= 0.0:
        return None
    # The lips where they are the colour of what covers the lower face.
    lips = zones[..., 2].astype(np.float32) * np.float32(1 / 255)
    sure = (off * lower) > 0.5
    if sure.any():
        covering = np.median(image[sure], axis=0).astype(np.float32)
        lips *= 1.0 - _ramps(np.sqrt(np.sum(np.square(image - covering), axis=-1)), BEARD_LIPS_NEAR)
    else:
        lips[:] = 0.0
    # Lone pixels and thin lines (a crease, a mole) are no beard; grown by a cell, so
    # that it reaches the face's outline (else a rim of the source's chin showed along
    # it, the grid's zone fading out there).
    square = np.ones((3, 3), np.uint8)
    beard = cv2.morphologyEx(np.maximum(off * lower, lips), cv2.MORPH_OPEN, square)
    beard = cv2.dilate(beard, square)
    return np.asarray(cv2.GaussianBlur(beard, (3, 3), 0) * np.float32(share), np.float32)


def _skin_like(colour: NDArray[np.float32]) -> bool:
    """Whether a (1, 1, 3) BGR colour (0..255) lies in the skin box of YCrCb (see
    SKIN_CR, SKIN_CB, SKIN_Y_MIN)."""
    bytes_ = np.clip(np.rint(colour), 0, 255).astype(np.uint8)
    y, cr, cb = (float(v) for v in cv2.cvtColor(bytes_, cv2.COLOR_BGR2YCrCb)[0, 0])
    return y >= SKIN_Y_MIN and SKIN_CR[0] <= cr <= SKIN_CR[1] and SKIN_CB[0] <= cb <= SKIN_CB[1]


def _off_hue(lab: NDArray[np.float32], skin_ab: NDArray[np.floating]) -> NDArray[np.float32]:
    """1 where a pixel (Lab) is not the skin (its median a, b) in another light: off its
    hue or less saturated (see BEARD_HUE, BEARD_CHROMA); 0 along it, as saturated."""
    skin_chroma = float(np.hypot(*skin_ab))
    if skin_chroma <= 1.0:
        return np.ones(lab.shape[:2], np.float32)
    chroma = np.hypot(lab[..., 1], lab[..., 2])
    cosine = (lab[..., 1] * skin_ab[0] + lab[..., 2] * skin_ab[1]) / np.maximum(
        chroma * skin_chroma, 1e-3
    )
    angle = np.degrees(np.arccos(np.clip(cosine, -1.0, 1.0))).astype(np.float32)
    along = (1.0 - _ramps(angle, BEARD_HUE)) * _ramps(
        chroma * np.float32(1.0 / skin_chroma), BEARD_CHROMA
    )
    return np.asarray(1.0 - along, np.float32)


# A target's fringe (see _target_occluders): forehead pixels at least FOREHEAD_Z[0]
# (fully FOREHEAD_Z[1]) from the cheeks' colour (Mahalanobis) and darker than their
# brightness by FOREHEAD_DARK[0] of it (fully FOREHEAD_DARK[1]).
FOREHEAD_Z = (2.5, 4.5)
FOREHEAD_DARK = (0.1, 0.25)


def _pixel_stats(pixels: NDArray[np.generic]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """``(cov, mean)`` of (N, 3) pixels: population covariance and mean, by OpenCV
    (cheaper than numpy's on these few pixels)."""
    cov, mean = cv2.calcCovarMatrix(
        np.asarray(pixels, np.float32), None, cv2.COVAR_NORMAL | cv2.COVAR_ROWS | cv2.COVAR_SCALE
    )
    return cov, mean


def _ramps(values: NDArray[np.float32], bounds: tuple[float, float]) -> NDArray[np.float32]:
    """_ramp for each value of an array."""
    lo, hi = bounds
    return np.minimum(np.maximum((values - lo) / (hi - lo), 0.0), 1.0).astype(np.float32)


def _skin_distance(
    small: NDArray[np.float32], cov: NDArray[np.float64], mean: NDArray[np.float64]
) -> NDArray[np.float32]:
    """Each pixel's Mahalanobis distance from a skin colour (mean, covariance; 16 added
    to the variances: a flat skin would make every pixel an outlier)."""
    diff = small - mean.astype(np.float32).reshape(1, 1, 3)
    _, inv = cv2.invert(cov + np.eye(3) * 16.0)
    # diff' inv diff by OpenCV's per-pixel matrix products (a quarter of numpy's cost
    # on these small images).
    z2 = cv2.transform(cv2.transform(diff, inv) * diff, np.ones((1, 3)))
    return np.sqrt(np.maximum(z2, 0.0)).astype(np.float32)


def _forehead_fringe(
    small: NDArray[np.float32],
    cheeks: NDArray[np.floating],
    forehead: NDArray[np.float32],
    cov: NDArray[np.float64],
    mean: NDArray[np.float64],
    grid: tuple[int, int],
) -> NDArray[np.float32] | None:
    """The target's fringe on the coarse grid (see _target_occluders), or None. The
    skin's colour is measured on the ``cheeks`` where enough of them show, else the
    whole skin's (``cov``, ``mean``) is used."""
    zone, cheek_small = (
        cv2.resize(np.ascontiguousarray(m, np.float32), grid, interpolation=cv2.INTER_AREA)
        if m.shape[:2] != small.shape[:2]
        else np.asarray(m, np.float32)
        for m in (forehead, cheeks)
    )
    pixels = small[cheek_small > 0.9]
    if len(pixels) >= 32:
        cov, mean = _pixel_stats(pixels)
    brightness = float(mean.mean())
    if brightness < 1.0:
        return None
    darker = 1.0 - small.mean(-1) / np.float32(brightness)
    fringe = _ramps(_skin_distance(small, cov, mean), FOREHEAD_Z)
    fringe *= _ramps(darker, FOREHEAD_DARK) * zone
    # Lone pixels and thin lines (a wrinkle, a mole) are no fringe.
    fringe = cv2.morphologyEx(fringe, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    return np.asarray(cv2.GaussianBlur(fringe, (3, 3), 0), np.float32)


# Edge colour match (see _match_edge_colour): the ring where the source's share of the
# output is between EDGE_RING's bounds; texels there within EDGE_RING_Z (robust z in
# Lab) of their face's colour on both sides; the offsets spread with a Gaussian of
# EDGE_SPREAD of the grid's side, cut at EDGE_MAX_OFFSET grey levels, over a band that
# fades out where the share, blurred by EDGE_BAND of the grid's side, reaches 1. A
# tracked face's spread offsets move EDGE_FOLLOW of the way to each frame's (about a
# third of a second at 30 fps): the flicker of the video benchmark's clips stayed within
# 0.01 of it without the match (0.25: up to 0.04 over; every frame afresh: 1.09-1.34
# against 1.05-1.18).
EDGE_RING = (0.1, 0.8)
EDGE_RING_Z = 2.5
EDGE_SPREAD = 0.12
EDGE_BAND = 0.08
EDGE_MAX_OFFSET = 25.0
EDGE_FOLLOW = 0.1
# A tracked face's brow lifts (see Swapper._lift_brows) move BROW_FOLLOW of the way to
# each frame's; lifts under BROW_LIFT_MIN (inter-ocular distances) leave the mesh as it is.
BROW_FOLLOW = 0.5
BROW_LIFT_MIN = 0.005


_TRACK_VIEWS_LOCK = threading.Lock()
_TRACK_STEPS = itertools.count(1)


def _state_copy(state: dict[str, Any]) -> dict[str, Any]:
    """A copy of a swapper's track state deep enough that following it on leaves the
    original as it was (its values are replaced, never changed in place)."""
    return {key: dict(value) if isinstance(value, dict) else value for key, value in state.items()}


def _edge_memory(target_face: Face, source: object) -> dict[str, Any] | None:
    """Where a tracked face's edge offsets and shadow tint are followed (its track's
    state, per source); None for a still image."""
    state = target_face.track_state
    if state is None:
        return None
    memory = state.get("edge_colour")
    if memory is None or memory.get("source") is not source:
        memory = state["edge_colour"] = {"source": source}
    return memory


def _outer_falloff(share: NDArray[np.float32], below: float) -> NDArray[np.bool_]:
    """Where ``share`` is under ``below`` and connected to the grid's border through
    such cells: the face's edge, where the source's share falls off towards its
    outside. Dips inside the face (texels left to the target: a source's glare, a
    nostril, the eyes' and mouth's holes) are no part of it."""
    low = (share < below).astype(np.uint8)
    count, labels = cv2.connectedComponents(low, connectivity=4)
    if count <= 1:
        return np.zeros(share.shape, bool)
    edges = np.concatenate([labels[0], labels[-1], labels[:, 0], labels[:, -1]])
    touching = np.zeros(count, bool)
    touching[edges] = True
    touching[0] = False  # label 0: the cells at or over ``below``
    return np.asarray(touching[labels], bool)


def _match_edge_colour(
    source: NDArray[np.float32],
    target_small: NDArray[np.generic],
    share: NDArray[np.float32],
    skin: NDArray[np.float32],
    memory: dict[str, Any] | None = None,
) -> NDArray[np.float32]:
    """The source with the target's low-frequency colour along the mask's edge,
    fading inward over a band: the colour match is one map for the whole face, so
    where the target's own skin is redder or lighter near the edge (Biden's ruddy
    upper forehead) its forehead showed a seam above the swapped one.

    Worked out on a grid half as fine as ``target_small``'s coarse one: the offsets
    (target minus source) on the ring where the source's ``share`` of the output
    falls off, on ``skin`` seen as skin on both sides (not the target's hair, cloth
    or a highlight the edge reaches, nor the source's beard), spread inward by a
    normalised blur on a grid half as fine again. The face's middle keeps the colour
    match's result.

    ``memory``: a tracked face's (see :func:`_edge_memory`); the spread offsets and
    their weights are followed over its frames by an exponential average
    (EDGE_FOLLOW a frame), so that what its edge crosses from frame to frame does not
    make the face flicker.
    """
    ph, pw = source.shape[:2]
    grid = (max(8, target_small.shape[1] // 2), max(8, target_small.shape[0] // 2))
    coarse = (max(4, grid[0] // 2), max(4, grid[1] // 2))
    side = max(coarse)
    small_s = cv2.resize(source, grid, interpolation=cv2.INTER_AREA)
    small_t = cv2.resize(target_small, grid, interpolation=cv2.INTER_AREA).astype(np.float32)
    # (Bilinear: the masks are smooth, and an area filter from the processing size cost
    # more than the rest of this step.)
    m = cv2.resize(share, grid, interpolation=cv2.INTER_LINEAR)
    k = cv2.resize(np.ascontiguousarray(skin, np.float32), grid, interpolation=cv2.INTER_LINEAR)
    lo, hi = EDGE_RING
    face = (m > lo) & (k > 0.7)
    ring = face & _outer_falloff(m, hi)
    measured = False
    if int(ring.sum()) >= 8:
        for image in (small_t, small_s):
            lab = cv2.cvtColor(np.clip(image * np.float32(1 / 255), 0.0, 1.0), cv2.COLOR_BGR2Lab)
            # Robust statistics: a beard is a large part of a lower face. (Only the
            # ring's texels need their distance.)
            ring[ring] = _robust_z(lab[ring], lab[face]) < EDGE_RING_Z
        measured = int(ring.sum()) >= 8
    # What the track had (the crop's grid may change by a cell as the face moves).
    last = (
        [
            v if v.shape[:2] == (coarse[1], coarse[0]) else cv2.resize(v, coarse)
            for v in (memory["offsets"], memory["reach"])
        ]
        if memory is not None and "offsets" in memory
        else None
    )
    if measured:
        weight = ring.astype(np.float32)
        # Spread on a grid half as fine (it is smooth).
        offsets = cv2.resize(
            (small_t - small_s) * weight[..., None], coarse, interpolation=cv2.INTER_AREA
        )
        reach = cv2.resize(weight, coarse, interpolation=cv2.INTER_AREA)
        offsets = cv2.GaussianBlur(offsets, (0, 0), EDGE_SPREAD * side)
        reach = cv2.GaussianBlur(reach, (0, 0), EDGE_SPREAD * side)
        if last is not None:
            rate = np.float32(EDGE_FOLLOW)
            offsets = last[0] + rate * (offsets - last[0])
            reach = last[1] + rate * (reach - last[1])
    elif last is not None:  # nothing measured in this frame: the track's so far
        offsets, reach = last
    else:
        return source
    if memory is not None:
        memory["offsets"], memory["reach"] = offsets, reach
    # Where the ring is far (the face's middle, beyond its band), no offset at all.
    inner = cv2.GaussianBlur(
        cv2.resize(m, coarse, interpolation=cv2.INTER_AREA), (0, 0), EDGE_BAND * side
    )
    fade = np.clip((1.0 - inner) * 2.0, 0.0, 1.0) * np.clip(reach * 50.0, 0.0, 1.0)
    # (Cut before the fade: cut after it, a large offset on the ring came over the
    # face's middle at the cut's full size.)
    offsets = np.clip(
        offsets / np.maximum(reach, 1e-3)[..., None], -EDGE_MAX_OFFSET, EDGE_MAX_OFFSET
    )
    offsets = (offsets * fade[..., None]).astype(np.float32)
    return np.asarray(
        cv2.add(source, cv2.resize(offsets, (pw, ph), interpolation=cv2.INTER_LINEAR)),
        np.float32,
    )


# Light match (see _match_light): blur width as a fraction of the skin's extent, and
# the largest brightening or darkening it may apply.
LIGHT_SIGMA = 0.12
LIGHT_GAIN_RANGE = (0.6, 1.6)
# The light across the whole face: averaged over a third of its width, and matched
# LIGHT_BROAD_SHARE times as strongly as the finer shading (in full from --light 0.5).
LIGHT_BROAD_SIGMA = 0.33
LIGHT_BROAD_SHARE = 2.0
# The outer face (cheeks' sides, temples, jaw: past LIGHT_OUTER_X[0] of the eyes' outer
# corners' x from the midline, in full past LIGHT_OUTER_X[1]) is also lit up to the
# target's light over a Gaussian LIGHT_OUTER_SIGMA of the face wide, matched in full
# from --light 0.5. There the output's shape is the target's, and a target's lit
# cheeks (a smile's, a side light's) had come out flat and darker: by 7-12 L on the
# cheeks of Biden, Angelina and p27 on average over their 20 sources. Only brightening:
# darkening the source's own shading there too took more of its identity.
LIGHT_OUTER_SIGMA = 0.06
LIGHT_OUTER_X = (0.85, 1.15)


@functools.lru_cache(maxsize=4)
def _uv_outer(model: FaceModel, size: int) -> NDArray[np.float32]:
    """(S, S) 0..1: the outer face, see LIGHT_OUTER_X (read-only, shared)."""
    eye_outer_x = _eye_outer_x(model)
    lo, hi = LIGHT_OUTER_X
    ax = np.abs(_uv_x(model, size))
    outer = np.clip((ax - lo * eye_outer_x) / ((hi - lo) * eye_outer_x), 0.0, 1.0)
    outer = outer.astype(np.float32)
    outer.setflags(write=False)
    return outer


# Shadow tint (see _match_shadow_tint): a crease's detail is the log colour less its
# blur on skin over SHADOW_TINT_SIGMA of the skin's extent (a fold a few pixels wide and
# its soft side); shadows are the skin's texels darker than their blur by
# SHADOW_TINT_DEPTH times the detail's mean size, and by SHADOW_TINT_FLOOR (log units:
# 1%) at least. A target with fewer shadow texels than SHADOW_TINT_SUPPORT (none ..
# all, on the half-size grid it is measured on) keeps the source's tint by the rest.
# Each channel's slope is kept within SHADOW_TINT_RANGE. The source's shadows are kept
# as bytes, 255 for SHADOW_TINT_LOG (a texel darker than its surround by a factor e).
# A tracked face's change moves SHADOW_TINT_FOLLOW of the way to each frame's.
SHADOW_TINT_SIGMA = 0.05
SHADOW_TINT_DEPTH = 1.0
SHADOW_TINT_FLOOR = 0.01
SHADOW_TINT_SUPPORT = (50.0, 200.0)
SHADOW_TINT_RANGE = (0.3, 2.0)
SHADOW_TINT_LOG = 1.0
SHADOW_TINT_FOLLOW = 0.1


def _log_detail(
    logs: NDArray[np.float32], on: NDArray[np.float32], sigma: float
) -> NDArray[np.float32]:
    """Log colour (``log(1 + image)``, one channel or three) less its Gaussian blur of
    ``sigma`` pixels on the ``on`` texels (0/1): what lies off them (eyes, hair, the
    background) does not darken the blur."""
    return np.asarray(cv2.subtract(logs, _blur_within_coarse(logs, on, sigma)), np.float32)


def _shadows(
    image: NDArray[np.float32], on: NDArray[np.float32], sigma: float, around: bool = False
) -> tuple[NDArray[np.float64], int, NDArray[np.float32]]:
    """How a photo's creases darken each channel: ``(slopes, shadows, luma)``.

    Shadows multiply the light, so this works on log colour (_log_detail); the luma is
    the channels' weighted log. The shadows are the texels on ``on`` (0/1 skin) whose
    luma detail is darker than SHADOW_TINT_DEPTH times its mean size (and than
    SHADOW_TINT_FLOOR). Each channel's slope is the least-squares ratio of its detail
    to the luma's there (1, 1, 1: a grey shadow; a red one drops less in red): the
    blur takes in part of a shadow's depth, in every channel by the same share, so
    the slopes hold. ``shadows``: how many texels that was; ``luma``: the luma
    detail, with ``around`` against the skin round the shadows alone (the shadows'
    full depth: the part the blur took in had left a warm photo's folds half red).
    """
    logs = cv2.log(cv2.add(image, 1.0))
    detail = _log_detail(logs, on, sigma)
    luma = cv2.cvtColor(detail, cv2.COLOR_BGR2GRAY)
    mask = on > 0
    values = luma[mask]
    if values.size == 0:
        return np.ones(3), 0, luma
    depth = max(SHADOW_TINT_DEPTH * float(np.abs(values).mean()), SHADOW_TINT_FLOOR)
    shadow = mask & (luma < -depth)
    if around:
        detail = _log_detail(logs, (mask & ~shadow).astype(np.float32), sigma)
        luma = cv2.cvtColor(detail, cv2.COLOR_BGR2GRAY)
    # Sums over the shadows by whole-image products (no gathering of texels).
    weighted = cv2.multiply(luma, shadow.astype(np.float32))
    energy = float(cv2.sumElems(cv2.multiply(weighted, luma))[0])
    if energy <= 1e-9:
        return np.ones(3), 0, luma
    sums = cv2.sumElems(cv2.multiply(detail, cv2.merge([weighted] * 3)))[:3]
    slopes = np.array(sums, np.float64) / energy
    return np.clip(slopes, *SHADOW_TINT_RANGE), int(np.count_nonzero(shadow)), luma


def _match_shadow_tint(
    source: NDArray[np.float32],
    target: NDArray[np.float32],
    skin: NDArray[np.floating],
    shade: NDArray[np.uint8],
    memory: dict[str, Any] | None = None,
) -> NDArray[np.float32]:
    """Give the source's creases and folds the colour the target's own shadows have.

    A crease darkens skin unevenly across the channels, by the photo's light and the
    skin under it: an old, warm photo's folds drop much more in green and blue than in
    red. The global colour match moves the skin's mean and spread, not this, so Grace
    Hopper's folds stayed red lines on a cooler target's cheeks (on p19's turned face,
    beside the nose, they read as cuts). Both photos' slopes are measured alike, on
    their shadows on ``skin`` (0..1) at half the size (_shadows), and the source's
    shadows (``shade``: bytes, see SHADOW_TINT_LOG, looked up from its texture) move
    from its slopes to the target's: highlights and the broad colour are untouched.
    A target with few shadows to measure leaves the source's tint (SHADOW_TINT_SUPPORT).
    A tracked face's change (``memory``: its track's, see _edge_memory) moves
    SHADOW_TINT_FOLLOW of the way to each frame's: measured afresh in each, the
    folds' colour flickered.
    """
    h, w = skin.shape[:2]
    if min(h, w) < 16:
        return source
    on = cv2.compare(skin, 0.5, cv2.CMP_GT)
    _, _, bw, bh = cv2.boundingRect(on)
    on_half = cv2.compare(cv2.pyrDown(on), 127, cv2.CMP_GT).astype(np.float32)
    on_half *= np.float32(1.0 / 255.0)
    sigma = SHADOW_TINT_SIGMA * max(bw, bh) / 2.0
    source_slopes, _, _ = _shadows(cv2.pyrDown(source), on_half, sigma)
    target_slopes, count, _ = _shadows(cv2.pyrDown(target), on_half, sigma)
    change = (target_slopes - source_slopes) * _ramp(count, SHADOW_TINT_SUPPORT)
    if not np.isfinite(change).all():  # (never for pixels in range; no NaN kept)
        change = np.zeros(3)
    if memory is not None:
        last = memory.get("shadow_tint")
        if last is not None:
            change = last + SHADOW_TINT_FOLLOW * (change - last)
        memory["shadow_tint"] = change
    if float(np.abs(change).max()) < 0.01:
        return source
    depth = shade.astype(np.float32) * np.float32(-SHADOW_TINT_LOG / 255.0)
    gain = cv2.exp(cv2.merge([depth * np.float32(c) for c in change]))
    return np.asarray(cv2.multiply(source, gain), np.float32)


def _texture_bytes(texture: NDArray[np.floating], shade: NDArray[np.uint8]) -> NDArray[np.uint8]:
    """A (S, S, 3) float texture as bytes, with its shadows (see _source_shadows) as a
    fourth channel."""
    colour = np.round(np.clip(texture, 0.0, 255.0)).astype(np.uint8)
    return np.asarray(cv2.merge([*cv2.split(colour), shade]), np.uint8)


def _source_shadows(texture: NDArray[np.floating], on: NDArray[np.floating]) -> NDArray[np.uint8]:
    """A source texture's shadows on its skin ``on`` (0..1): its log-luma detail's
    negative part (see _shadows) as bytes (see SHADOW_TINT_LOG), feathered at the
    skin's edge."""
    on = (np.asarray(on) > 0.5).astype(np.float32)
    _, _, bw, bh = cv2.boundingRect(cv2.compare(on, 0.5, cv2.CMP_GT))
    _, _, luma = _shadows(
        np.asarray(texture, np.float32), on, SHADOW_TINT_SIGMA * max(bw, bh, 1), around=True
    )
    depth = cv2.multiply(cv2.min(luma, 0.0), cv2.blur(on, (5, 5)))
    shade = np.clip(depth * np.float32(-255.0 / SHADOW_TINT_LOG), 0.0, 255.0)
    return np.round(shade).astype(np.uint8)


# A colourless source's output takes the target's colour (see _take_target_chroma):
# its Lab a and b blurred over CHROMA_TAKE_BLUR of the crop's side (on skin further
# than CHROMA_TAKE_MARGIN from its edge, its skin's, over CHROMA_TAKE_SKIN_BLUR), at
# most CHROMA_TAKE_REACH Lab units from its skin's mean colour (a fair fringe's
# strands or a highlight's orange, where the source's skin shows, are no colour of
# its face; a red lip is about 20 from its skin). Over a twelfth of the crop the
# skin's colour was its mean, less its flush: Bob Dylan's face on p17 came out 3.7 a
# less red on her cheeks than her own (the cheeks' a-b distance over his 20 pairs 1.0
# at a thirtieth from the pixels near the skin's colour, against 1.6; 0.5 at a
# sixtieth from all of them, one retrieved pair fewer).
CHROMA_TAKE_BLUR = 0.006
CHROMA_TAKE_SKIN_BLUR = 0.03
# Only skin pixels within CHROMA_TAKE_NEAR[0] in a-b of the skin's mean colour count
# there, none past CHROMA_TAKE_NEAR[1]: a flush does (about 6), a glint (a lens's
# blue glare, over 30) or a grey beard (18 from a fair skin) does not; where those
# weigh under CHROMA_TAKE_SURE in that blur (inside a beard), the skin's mean colour
# is taken.
CHROMA_TAKE_NEAR = (8.0, 14.0)
CHROMA_TAKE_SURE = 0.2
CHROMA_TAKE_MARGIN = 0.02  # of the crop's side: off the skin's edge, pixel by pixel
CHROMA_TAKE_REACH = 20.0


def _take_target_chroma(
    source: NDArray[np.float32],
    target: NDArray[np.float32],
    share: float,
    skin_bgr: NDArray[np.float32] | None,
    skin: NDArray[np.floating] | None = None,
) -> NDArray[np.float32]:
    """``source`` (colour-matched) with ``share`` of its colour replaced by the
    target's own, its lightness kept: a black-and-white photo (Bob Dylan's) holds no
    colour of lips, cheeks or irises, and its colour-matched face came out in one
    even skin tone with grey lips and grey-blue eyes on every colour target. The
    target's face is where the output's is (its mesh), so its lips and irises lend
    their own colour pixel for pixel, and on ``skin`` (0..1, where the skin
    texels are) its skin its colour a little blurred, a flush, from the pixels near
    the skin's colour (see CHROMA_TAKE_NEAR): there, pixel for pixel, a glasses
    lens's glare had come through as a blue patch under the eye.
    ``skin_bgr``: the target skin's mean colour (see _target_occluders); None takes
    the mean of ``target``."""
    side = max(source.shape[:2])
    scale = np.float32(1.0 / 255.0)
    blurred = cv2.GaussianBlur(target, (0, 0), max(CHROMA_TAKE_BLUR * side, 0.5))
    mean_bgr = (
        np.asarray(skin_bgr, np.float32)
        if skin_bgr is not None
        else target.reshape(-1, 3).mean(0).astype(np.float32)
    )
    centre = cv2.cvtColor(np.clip(mean_bgr * scale, 0.0, 1.0).reshape(1, 1, 3), cv2.COLOR_BGR2Lab)
    if skin is not None:
        weight = np.ascontiguousarray(skin, np.float32)
        # The skin's colour from its pixels near the skin's own (see CHROMA_TAKE_NEAR).
        ab = cv2.cvtColor(np.clip(target * scale, 0.0, 1.0), cv2.COLOR_BGR2Lab)[..., 1:]
        far = np.sqrt(((ab - centre[0, 0, 1:]) ** 2).sum(-1))
        near = _ramps(far, CHROMA_TAKE_NEAR[::-1])
        wide = max(CHROMA_TAKE_SKIN_BLUR * side, 1.0)
        kept = weight * near
        spread = cv2.GaussianBlur(target * kept[..., None], (0, 0), wide)
        total = cv2.GaussianBlur(kept, (0, 0), wide)
        spread /= np.maximum(total, 1e-3)[..., None]
        # Far inside what is off that colour (a beard), the skin's mean colour.
        sure = np.clip(total * np.float32(1.0 / CHROMA_TAKE_SURE), 0.0, 1.0)[..., None]
        spread = mean_bgr + sure * (spread - mean_bgr)
        # The lips' and eyes' own colours reach a little past the skin mask's edge
        # (the mesh's lips are not quite the photo's): pixel by pixel there too.
        k = max(3, int(CHROMA_TAKE_MARGIN * side) | 1)
        weight = cv2.erode(weight, np.ones((k, k), np.uint8))
        weight = cv2.GaussianBlur(weight, (k, k), 0)
        blurred = blurred + weight[..., None] * (spread - blurred)
    lab_t = cv2.cvtColor(np.clip(blurred * scale, 0.0, 1.0), cv2.COLOR_BGR2Lab)
    lab_s = cv2.cvtColor(np.clip(source * scale, 0.0, 1.0), cv2.COLOR_BGR2Lab)
    offset = lab_t[..., 1:] - centre[0, 0, 1:]
    length = np.sqrt((offset**2).sum(-1, keepdims=True))
    offset *= np.minimum(CHROMA_TAKE_REACH / np.maximum(length, 1e-6), 1.0)
    ab = centre[0, 0, 1:] + offset
    lab_s[..., 1:] += share * (ab - lab_s[..., 1:])
    return np.asarray(cv2.cvtColor(lab_s, cv2.COLOR_Lab2BGR) * np.float32(255.0), np.float32)


@dataclass(frozen=True)
class _SkinGrid:
    """A crop's skin on a grid an eighth of its size, for the light matches: smooth
    maps are worked out there. An area filter by a whole factor is a fast path in
    OpenCV, so the crop is cut to a multiple of 8 (``step``; 1 for a crop under 64
    pixels) and the last few rows and columns are left out.

    Both light matches take the same skin: :meth:`of` is worked out once a frame and
    handed to each.

    Attributes:
        size: the crop's (width, height) in pixels.
        width, height: the skin's extent in the crop, in pixels.
        step: crop pixels per grid cell.
        small: the grid's (width, height) in cells.
        cells: (small) each cell's share of skin, 0..255.
    """

    size: tuple[int, int]
    width: int
    height: int
    step: int
    small: tuple[int, int]
    cells: NDArray[np.float32]

    @classmethod
    def of(cls, on: NDArray[np.generic] | _SkinGrid) -> _SkinGrid | None:
        """The grid of ``on`` (a mask, nonzero on skin: bool, 0/1 or 0/255; a grid is
        its own), or None when the skin spans under 16 pixels either way."""
        if isinstance(on, _SkinGrid):
            return on
        weights = on if on.dtype == np.uint8 else (np.asarray(on) != 0).astype(np.uint8)
        _, _, bw, bh = cv2.boundingRect(weights)
        if bw < 16 or bh < 16:
            return None
        h, w = weights.shape
        k = 8 if min(h, w) >= 64 else 1
        small = (w // k, h // k)
        cut = cv2.compare(weights[: small[1] * k, : small[0] * k], 0, cv2.CMP_GT)
        cells = np.asarray(cv2.resize(cut, small, interpolation=cv2.INTER_AREA), np.float32)
        return cls((w, h), bw, bh, k, small, cells)

    @property
    def cut(self) -> tuple[int, int]:
        """The (width, height) of the crop's part the grid covers: a multiple of step."""
        return self.small[0] * self.step, self.small[1] * self.step

    def shrink(self, image: NDArray[np.generic]) -> NDArray[np.float32]:
        """``image`` (the crop's size) averaged onto the grid, as float32."""
        wk, hk = self.cut
        return np.asarray(
            cv2.resize(image[:hk, :wk], self.small, interpolation=cv2.INTER_AREA), np.float32
        )


def _match_light(
    source: NDArray[np.float32],
    target: NDArray[np.generic],
    on: NDArray[np.generic] | _SkinGrid,
    amount: float,
    outer: NDArray[np.uint8] | None = None,
) -> NDArray[np.float32]:
    """Give the source the target's broad light and shade on skin.

    Both lumas are averaged over ``on`` (skin seen in both) with Gaussians about an
    eighth and a third of the face wide, normalised by the blurred mask so that eyes,
    brows and the mask's edge take the surrounding skin's value instead of being
    diluted. Their ratios scale the source: the broad one (the light across the
    face) raised to ``2 * amount`` up to 1, the finer one's share beyond it (the
    shading of the target's build) to ``amount``. On the ``outer`` face (0..255,
    over the same crop at any size; see LIGHT_OUTER_X) the gain may be higher: up
    to that of a ratio averaged over LIGHT_OUTER_SIGMA of the face, its share
    beyond the broad one raised to ``2 * amount`` up to 1. The global colour match
    has already set the means, so this moves only where the light falls. The gain
    fades to 1 where little skin supports it and is clipped to LIGHT_GAIN_RANGE.
    ``on`` is a mask, nonzero on skin (bool, 0/1 or 0/255), or its _SkinGrid.
    """
    grid = _SkinGrid.of(on)
    if grid is None:
        return source
    shrink, k, small = grid.shrink, grid.step, grid.small
    (w, h), (wk, hk) = grid.size, grid.cut
    # (The ratio is smooth: worked out on the grid; the last few rows and columns past
    # its multiple of 8 take the edge's gain.)
    m = grid.cells * np.float32(1.0 / 255.0)
    grey = [shrink(cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)) * m for image in (target, source)]

    def ratio(sigma: float) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
        support = cv2.GaussianBlur(m, (0, 0), sigma)
        inverse_support = 1.0 / np.maximum(support, 1e-4)
        t, s = (cv2.GaussianBlur(g, (0, 0), sigma) * inverse_support for g in grey)
        return (t + 1.0) / (s + 1.0), support

    size = max(grid.width, grid.height) / k
    near, support = ratio(LIGHT_SIGMA * size)
    broad, _ = ratio(LIGHT_BROAD_SIGMA * size)
    lo, hi = LIGHT_GAIN_RANGE
    # The light across the whole face (a side light) in full from amount 0.5 up; the
    # shading an eighth of the face wide (sockets, cheekbones: part of the target's
    # build) by ``amount``.
    near = np.clip(near, lo, hi)
    broad = np.clip(broad, lo, hi)
    across = broad ** min(1.0, LIGHT_BROAD_SHARE * amount)
    gain = np.clip(across * (near / broad) ** amount, lo, hi)
    reach = (
        None
        if outer is None
        else cv2.resize(outer, small, interpolation=cv2.INTER_AREA) * np.float32(1.0 / 255.0)
    )
    if reach is not None and float(reach.max()) > 0.0:
        # The outer face lit up to the target's finer light (see LIGHT_OUTER_SIGMA).
        fine, _ = ratio(LIGHT_OUTER_SIGMA * size)
        share = min(1.0, LIGHT_BROAD_SHARE * amount)
        lit = np.clip(across * (np.clip(fine, lo, hi) / broad) ** share, lo, hi)
        gain = np.maximum(gain, gain * (lit / gain) ** reach)
    # Where the blurred mask is thin (far from skin) the ratio is an extrapolation.
    confidence = np.minimum(np.maximum(support * (1.0 / 0.3), 0.0), 1.0)
    gain = (1.0 + (gain - 1.0) * confidence).astype(np.float32)
    gain = cv2.resize(gain, (wk, hk), interpolation=cv2.INTER_LINEAR)
    if (hk, wk) != (h, w):
        gain = cv2.copyMakeBorder(gain, 0, h - hk, 0, w - wk, cv2.BORDER_REPLICATE)
    return np.asarray(cv2.multiply(source, cv2.merge([gain, gain, gain])), np.float32)


# The colour of the light across the face (see _match_light_colour): the largest gain a
# channel may take from it either way.
LIGHT_COLOUR_RANGE = (0.8, 1.25)
# How far round (in face widths, a Gaussian's sigma) the target's own colour is read
# that the change may not pass.
LIGHT_COLOUR_NEAR = 1.0 / 16.0
_LUMA = color_ops.LUMA_BGR.astype(np.float32)


def _log_chromaticity(image: NDArray[np.float32]) -> NDArray[np.float32]:
    """(H, W, 3) each pixel's log chromaticity: its channels' log share of its luma."""
    luma = image @ _LUMA
    return np.asarray(np.log((image + 1.0) / (luma[..., None] + 1.0)), np.float32)


def _light_colour_slopes(
    chroma: NDArray[np.float32], weights: NDArray[np.float32], x: NDArray[np.float32]
) -> NDArray[np.float32]:
    """(3,) how each channel's log chromaticity (``chroma``, see _log_chromaticity,
    or the difference of two) changes along ``x`` over ``weights``: the slope of a
    weighted straight-line fit (all the same (H, W) grid)."""
    w = weights.reshape(-1)
    xs = x.reshape(-1)
    off = xs - np.float32(float(w @ xs) / float(w.sum()))
    wx = w * off
    spread = float(wx @ off)
    if spread <= 1e-9:
        return np.zeros(3, np.float32)
    # (The weighted mean of the chromaticity drops out: the weighted offsets sum to 0.)
    return np.asarray((wx @ chroma.reshape(-1, 3)) / np.float32(spread), np.float32)


def _match_light_colour(
    source: NDArray[np.float32],
    target: NDArray[np.generic],
    on: NDArray[np.generic] | _SkinGrid,
    amount: float = 0.5,
    across: NDArray[np.floating] | None = None,
) -> NDArray[np.float32]:
    """Give the source the change of the target's light colour from one side of the
    face to the other.

    A face lit by two lights of different colour (daylight from a window on one
    side, a warm lamp on the other: a webcam's usual light) is bluer on one cheek
    and yellower on the other. The colour match is one map for the whole face, and
    the light match scales all channels alike, so the swapped face kept its photo's
    own colour from side to side and met the target's bluer cheek at the mask's
    edge as a band. Each channel's log chromaticity (its share of the luma) is
    fitted as a straight line across the face (along ``across``, the face's own
    left-right direction in the crop, image x by default; in face widths) on ``on``
    (skin seen in both), for the target and the source; the source takes the
    difference of the slopes, as a gain that keeps the luma of the skin's mean
    colour, clipped to LIGHT_COLOUR_RANGE: as the light across the face (see
    _match_light), in full from ``amount`` (``--light``) 0.5 up. A straight line
    holds no feature: a source's rosy cheeks or a target's beard, the same on both
    sides, leave the slopes alone.

    The line never takes a channel past the target's own colour nearby (the
    difference of the two faces' log chromaticities on the skin, spread over
    LIGHT_COLOUR_NEAR of the face), nor away from it: where the target's colour
    changes on one side only, the other side is left as it is. On a face with a
    hand to its cheek (img_p05) that cheek, in shadow and reddened by the hand and
    the shirt beside it, had tilted the line, and the other cheek, already the
    target's colour, was pushed green.
    """
    grid = _SkinGrid.of(on)  # (the fit needs no detail)
    if grid is None:
        return source
    # Cells wholly on skin: the mask's edge mixes in hair, lids and background.
    m = (grid.cells > 254.0).astype(np.float32)
    cells = float(m.sum())
    if cells < 16:
        return source
    k, small = grid.step, grid.small
    direction = np.array([1.0, 0.0]) if across is None else np.asarray(across, np.float64)
    norm = float(np.hypot(direction[0], direction[1]))
    # (No direction to read, or none finite: the image's x.)
    usable = math.isfinite(norm) and norm >= 1e-6
    cos, sin = (direction[0] / norm, direction[1] / norm) if usable else (1.0, 0.0)
    # Each cell's (and below, each pixel's) distance along that direction, in face
    # widths: a linear field, so a bilinear resize of the cells' gives the pixels'.
    scale = 1.0 / float(max(grid.width, grid.height))
    rows = ((np.arange(small[1], dtype=np.float32) + 0.5) * k - 0.5)[:, None]
    columns = ((np.arange(small[0], dtype=np.float32) + 0.5) * k - 0.5)[None, :]
    x = np.asarray((cos * columns + sin * rows) * scale, np.float32)
    small_source = grid.shrink(source)
    # The target's log chromaticity less the source's: a straight-line fit is linear,
    # so its slope is the difference of the two faces' slopes.
    difference = _log_chromaticity(grid.shrink(target)) - _log_chromaticity(small_source)
    slopes = _light_colour_slopes(difference, m, x)
    if not np.isfinite(slopes).all():  # (never for pixels in range)
        return source
    slopes *= np.float32(min(1.0, LIGHT_BROAD_SHARE * amount))
    # 0 at the skin's middle (the colour match has set its mean).
    middle = float((x * m).sum()) / cells
    change = (x - np.float32(middle))[..., None] * slopes
    # Never past the target's own colour there: each channel's change only towards the
    # target's colour nearby (the difference of the log chromaticities on the skin,
    # spread LIGHT_COLOUR_NEAR of the face), and no further.
    spread = max(LIGHT_COLOUR_NEAR * grid.width / k, 0.5)
    near = cv2.GaussianBlur(m, (0, 0), spread)
    towards = cv2.GaussianBlur(difference * m[..., None], (0, 0), spread)
    towards *= (np.minimum(near * 4.0, 1.0) / np.maximum(near, 1e-3))[..., None]
    change = np.where(
        change * towards > 0.0, np.sign(change) * np.minimum(np.abs(change), np.abs(towards)), 0.0
    )
    # Scaled so that the skin's mean colour keeps its luma.
    gain = np.exp(change)
    skin = (small_source * m[..., None]).reshape(-1, 3).sum(0) / cells * _LUMA
    gain *= float(skin.sum()) / np.maximum(gain @ skin, 1e-6)[..., None]
    gain = np.clip(gain, *LIGHT_COLOUR_RANGE).astype(np.float32)
    # Onto the crop's pixels: the grid is stretched over the few rows and columns past
    # the multiple of 8 (a cell moves by under 8 pixels; the gain is smooth).
    full = cv2.resize(gain, grid.size, interpolation=cv2.INTER_LINEAR)
    return np.asarray(cv2.multiply(source, full), np.float32)


def _match_detail(
    source: NDArray[np.float32],
    target: NDArray[np.float32],
    skin: NDArray[np.floating],
    strength: float,
    eyes: NDArray[np.float32] | None = None,
    levels: int = 2,
    grain: Callable[[], tuple[NDArray[np.float32], float] | None] | None = None,
    cheeks: NDArray[np.floating] | None = None,
) -> NDArray[np.float32]:
    """Scale the source's finest Laplacian bands down to the target's energy on skin,
    and make up with ``grain`` what they leave short of it.

    Band ``i`` of an image is its Gaussian level ``i`` minus the upsampled level
    ``i + 1`` (about 1-2 and 2-4 pixels at the processing size). Each band's gain is
    ``sqrt(target energy / source energy)`` over skin, raised to ``strength`` and never
    above 1: a soft target is never sharpened into noise. The energies are measured on
    luma, where pores and grain live; the gain scales the colour bands, so a detail's
    hue is kept as it fades. (A luma change added to all three channels alike turned
    an old source's wrinkles, darker in green and blue than in red, into orange-red
    lines: taking out their luma left the red brighter than the skin around.)

    ``eyes`` (0..1, the eye openings, see _eye_openings) take gains of their own, from
    the energies within them: toned down with the skin, a sharp source's eyes on a
    target whose eyes were as sharp but whose skin was smoother (Grace Hopper's on
    the astronaut, at gains 0.35 and 0.51) came out as grey blurs.

    ``grain`` (a function that draws the face-locked grain of _grain_plane through
    the face's UV map at this size, luma around 0, with the share of the shortfall
    it is to make up; or None; called only when it is needed) makes up, in the
    finest band on skin, ``strength`` times that share of what a softer
    source leaves short of the target's level there (see _grain_share; the next
    band holds wrinkles and pores as much as grain, and made up there a small
    elder's photo, p24, took one and a half times his cheeks' grain): a soft or
    small photo swapped onto a sharp, grainy frame
    (Grace Hopper's film grain and wrinkles, Obama's pores at 1.6 times the
    processing size) came out as smooth as plastic, its grain a fifth to a third of
    the frame's around it. The grain moves with the face, as skin texture does, and
    stays on skin (not in the eyes, lips or brows). Its level is measured on the
    ``cheeks`` (0..1) where they are skin: their texture is the skin's grain, where
    a forehead's or an elder's wrinkles would count as grain too.
    """
    on = (skin > 0.5).astype(np.float32)
    if float(on.sum()) < 16:
        return source
    measured = on
    if cheeks is not None and grain is not None:
        measured = on * (np.asarray(cheeks) > 0.5).astype(np.float32)
    # The eyes are worked on within their box (x0, y0, x1, y1), halved at each level.
    box = None
    if eyes is not None:
        x, y, w, h = cv2.boundingRect(cv2.compare(eyes, 0.5, cv2.CMP_GT))
        if w * h >= 16:
            x, y, w, h = cv2.boundingRect(cv2.compare(eyes, 0.0, cv2.CMP_GT))
            box = (x, y, x + w, y + h)
    src_level = source
    tgt_grey = cv2.cvtColor(target, cv2.COLOR_BGR2GRAY)

    def gain(
        src_band: NDArray[np.float32], tgt_band: NDArray[np.float32], where: NDArray[np.float32]
    ) -> float:
        # Sums of squares on the mask (a masked cv2.mean is 20x slower); the source's
        # luma band is its colour band's luma (both are linear). By OpenCV's norm, not a
        # BLAS dot: OpenBLAS splits one over 10 000 values across its threads, and
        # waking them (or, with the cores busy, waiting for them) cost more than the sum.
        src_on = cv2.multiply(cv2.cvtColor(src_band, cv2.COLOR_BGR2GRAY), where)
        tgt_on = cv2.multiply(tgt_band, where)
        ratio = cv2.norm(tgt_on, cv2.NORM_L2SQR) / max(cv2.norm(src_on, cv2.NORM_L2SQR), 1e-6)
        return float(min(1.0, np.sqrt(ratio)) ** strength)

    gains: list[float] = []
    # Per level: the eyes' gain, their box and their mask within it.
    eye_parts: list[tuple[float, tuple[slice, slice], NDArray[np.float32]]] = []
    bands: list[NDArray[np.float32]] = []
    made_up: NDArray[np.float32] | None = None  # the grain laid on the finest band
    for level in range(levels):
        src_band, src_down = _laplacian_step(src_level)
        tgt_band, tgt_down = _laplacian_step(tgt_grey)
        gains.append(gain(src_band, tgt_band, on))
        if level == 0 and grain is not None:
            made_up = _grain_share(src_band, tgt_band, grain, (on, measured), strength)
        if eyes is not None and box is not None:
            step = 1 << level
            x0, y0, x1, y1 = box
            at = (slice(y0 // step, -(-y1 // step)), slice(x0 // step, -(-x1 // step)))
            mask = np.ascontiguousarray(eyes[::step, ::step][at])
            inside = (mask > 0.5).astype(np.float32)
            eye_parts.append(
                (gain(src_band[at], np.ascontiguousarray(tgt_band[at]), inside), at, mask)
            )
        bands.append(src_band)
        src_level, tgt_grey = src_down, tgt_down
        on = on[::2, ::2][: src_level.shape[0], : src_level.shape[1]]
        measured = measured[::2, ::2][: src_level.shape[0], : src_level.shape[1]]
    if min(gains + [g for g, _, _ in eye_parts]) >= 0.999 and made_up is None:
        return source
    # The change, coarsest band first: each band times (gain - 1), upsampled; in the
    # eyes the gain moves to theirs.
    change = cv2.multiply(bands[-1], gains[-1] - 1.0)
    for level in reversed(range(levels)):
        band = bands[level]
        if level < levels - 1:
            change = cv2.pyrUp(change, dstsize=(band.shape[1], band.shape[0]))
            change = cv2.scaleAdd(band, gains[level] - 1.0, change)
        if eye_parts and eye_parts[level][0] != gains[level]:
            eye_gain, at, mask = eye_parts[level]
            weight = mask * np.float32(eye_gain - gains[level])
            change[at] += cv2.multiply(
                np.ascontiguousarray(band[at]), cv2.merge([weight, weight, weight])
            )
    if made_up is not None:
        # Each channel in proportion to it, so that the grain changes the lightness
        # and not the hue (the same grey levels on every channel speckled a dark
        # brown skin with grey and blue).
        luma = cv2.max(cv2.cvtColor(source, cv2.COLOR_BGR2GRAY), GRAIN_LUMA_FLOOR)
        relative = cv2.divide(made_up, luma)
        change = cv2.add(change, cv2.multiply(source, cv2.merge([relative] * 3)))
    return np.asarray(cv2.add(source, change), np.float32)


# The grain is laid on each channel in proportion to it (see _match_detail), over the
# pixel's luma but never less than this many grey levels (near black, a ratio over it
# would be noise).
GRAIN_LUMA_FLOOR = 16.0
# A face's grain is made up from GRAIN_FACE_PX[0] pixels wide at the processing size,
# in full from GRAIN_FACE_PX[1]: a smaller face's finest band is its compression's
# blocks and its resampling more than skin, and its identity rests on few pixels
# (onto the 128 px photos p24 and p25, 90 px faces, grain moved d(out, src) up by
# 0.03 and 0.02).
GRAIN_FACE_PX = (96.0, 160.0)


def _grain_share(
    src_band: NDArray[np.float32],
    tgt_band: NDArray[np.float32],
    grain: Callable[[], tuple[NDArray[np.float32], float] | None],
    where: tuple[NDArray[np.float32], NDArray[np.float32]],
    strength: float,
) -> NDArray[np.float32] | None:
    """The grain (luma) on skin that makes up ``strength`` of what the source's finest
    band (BGR) leaves short of the target's (luma), from the finest band of the
    grain ``grain()`` draws, times the share it gives with it; None where the
    source's is as strong or stronger, or there is no grain. ``where``: (skin,
    where the levels are measured: the cheeks' skin, or all of it where the cheeks
    hold too few pixels). A band's level is its median magnitude there, at every
    third pixel (its energy is the target's features' edges more than its grain's:
    measured so, a small elder's wrinkles and beard asked for three times his
    cheeks' grain); independent bands' levels add as their squares do, so the
    grain supplies the root of the squares' difference."""
    on, measured = where
    rows, cols = on.shape[0], on.shape[1]
    sparse = (max(cols // 3, 1), max(rows // 3, 1))

    def shrunk(image: NDArray[np.generic]) -> NDArray[np.float32]:
        return np.asarray(cv2.resize(image, sparse, interpolation=cv2.INTER_NEAREST), np.float32)

    skin = shrunk(measured) > 0.5
    if int(skin.sum()) < 16:
        skin = shrunk(on) > 0.5
    if int(skin.sum()) < 16:
        return None

    def level(sampled: NDArray[np.float32]) -> float:
        return float(np.median(np.abs(sampled[skin])))

    # (The source's luma from its sparse samples: a third of a full conversion's work.)
    src_level = level(cv2.cvtColor(shrunk(src_band), cv2.COLOR_BGR2GRAY))
    tgt_level = level(shrunk(tgt_band))
    if tgt_level <= src_level:
        return None
    found = grain()
    if found is None:
        return None
    drawn, share = found
    band, _ = _laplacian_step(drawn)
    grain_level = level(shrunk(band))
    if grain_level <= 1e-6 or share <= 0.0:
        return None
    short = share * strength * (tgt_level**2 - src_level**2) ** 0.5
    return np.asarray(cv2.multiply(band, on, scale=short / grain_level), np.float32)


# An open mouth keeps the target's own lips along its opening, this fraction of the
# mouth's width deep: a closed source mouth's lip crease, stretched around a wide-open
# one, drew a dark ring. The depth ramps in over MOUTH_OPEN_RANGE of openness (height
# over width): lips that meet or part in a smile are the source's up to the opening.
MOUTH_KEEP_LIP = 0.05
MOUTH_OPEN_RANGE = (0.35, 0.7)


def _cut_mouth(weight: NDArray[np.float32], inner_lips: NDArray[np.float32]) -> None:
    """Zero the source's weight inside the target's mouth opening (``inner_lips``, the
    inner lip contour in ``weight``'s pixels) and, for a wide-open mouth, up to
    MOUTH_KEEP_LIP of the mouth's width around it, feathered: teeth, tongue and the
    lips' inner edge stay the target's. Drawn antialiased at full resolution (through
    the coarse UV lookup the opening's edge came out stair-stepped), in place, within
    the mouth's box."""
    h, w = weight.shape
    width = float(np.ptp(inner_lips[:, 0]))
    if width < 2.0:
        return
    openness = cv2.contourArea(inner_lips) / (width * width) * 4.0 / np.pi
    lo, hi = MOUTH_OPEN_RANGE
    grow = MOUTH_KEEP_LIP * width * min(max((openness - lo) / (hi - lo), 0.0), 1.0)
    reach = int(np.ceil(2.5 * grow)) + 4  # the band plus three blur sigmas
    x0, y0 = np.floor(inner_lips.min(0)).astype(int) - reach
    x1, y1 = np.ceil(inner_lips.max(0)).astype(int) + reach + 1
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return
    contour = np.round((inner_lips - np.array([x0, y0], np.float32)) * 16).astype(np.int32)
    cut = np.zeros((y1 - y0, x1 - x0), np.uint8)
    cv2.fillPoly(cut, [contour], 255, cv2.LINE_AA, shift=4)
    if grow >= 0.5:
        # The contour's band, 2 * grow wide, grows the opening by grow.
        thickness = int(round(2.0 * grow))
        cv2.polylines(cut, [contour], True, 255, thickness, cv2.LINE_AA, shift=4)
    keep = cv2.GaussianBlur(cut, (0, 0), max(0.5 * grow, 1.0)).astype(np.float32)
    region = weight[y0:y1, x0:x1]
    region *= 1.0 - keep * np.float32(1.0 / 255.0)


# The target's mouth opening as its pixels show it (see _cut_mouth_gap): inside its
# outer lips, pixels darker than its lips by MOUTH_GAP_Z[0] robust deviations (the
# gap between them), or less red by MOUTH_GAP_Z[1] and not darker (teeth), joined to
# the mesh's opening. The deviations are at least MOUTH_GAP_SPREAD (Lab L, a).
MOUTH_GAP_Z = (2.5, 2.5)
MOUTH_GAP_SPREAD = (3.0, 2.0)


def _cut_mouth_gap(
    weight: NDArray[np.float32],
    image: NDArray[np.generic],
    outer_lips: NDArray[np.float32],
    inner_lips: NDArray[np.float32],
) -> None:
    """Zero the source's weight where ``image`` (the target, in ``weight``'s pixels)
    shows its mouth open beyond the mesh's opening (``inner_lips``), in place.

    The mesh reads a talking mouth's opening smaller than it is: the gap of lips
    pushed forward as a line, the upper teeth under its upper lip. There the source's
    lips were drawn over the target's teeth and gap, and the output's mouth opened
    less than the target's. The target's lips are measured between its mesh's outer
    and inner lip lines (their median and spread in Lab); inside the outer line, the
    pixels darker than them (the gap) or less red and not darker (teeth) that join
    the mesh's opening stay the target's."""
    h, w = weight.shape
    x0, y0 = np.maximum(np.floor(outer_lips.min(0)).astype(int) - 2, 0)
    x1, y1 = np.minimum(np.ceil(outer_lips.max(0)).astype(int) + 3, (w, h))
    if x1 - x0 < 4 or y1 - y0 < 4:
        return
    crop = np.ascontiguousarray(image[y0:y1, x0:x1], np.float32)
    crop *= np.float32(1.0 / 255.0)
    lab = cv2.cvtColor(crop, cv2.COLOR_BGR2Lab)
    kernel = np.ones((3, 3), np.uint8)
    # Both lip lines in the box's pixels, 4 fractional bits.
    outer_line, inner_line = (
        np.round((points - np.array([x0, y0], np.float32)) * 16).astype(np.int32)
        for points in (outer_lips, inner_lips)
    )

    def filled(contour: NDArray[np.int32]) -> NDArray[np.uint8]:
        inside = np.zeros((y1 - y0, x1 - x0), np.uint8)
        cv2.fillPoly(inside, [contour], 255, cv2.LINE_8, shift=4)
        return inside

    outer = cv2.erode(filled(outer_line), kernel)
    opening = filled(inner_line)
    lips = lab[(outer > 0) & (cv2.dilate(opening, kernel) == 0)]
    if len(lips) < 20:
        return
    middle = np.median(lips, axis=0)
    spread = np.median(np.abs(lips - middle), axis=0) * 1.4826
    dev_l = max(float(spread[0]), MOUTH_GAP_SPREAD[0])
    dev_a = max(float(spread[1]), MOUTH_GAP_SPREAD[1])
    light, red = lab[..., 0], lab[..., 1]
    gap = light < middle[0] - MOUTH_GAP_Z[0] * dev_l
    teeth = (red < middle[1] - MOUTH_GAP_Z[1] * dev_a) & (light > middle[0] - dev_l)
    found = ((gap | teeth) & (outer > 0)) | (opening > 0)
    # Only what joins the mesh's opening (its line, for lips the mesh reads as shut).
    seed = opening.copy()
    cv2.polylines(seed, [inner_line], True, 255, 1, cv2.LINE_8, shift=4)
    keep = _joined(found, (seed > 0) & found).astype(np.uint8) * np.uint8(255)
    keep = cv2.morphologyEx(keep, cv2.MORPH_CLOSE, kernel)
    keep = cv2.GaussianBlur(keep, (0, 0), 0.7).astype(np.float32)
    region = weight[y0:y1, x0:x1]
    region *= 1.0 - keep * np.float32(1.0 / 255.0)


def _shrink(image: Frame, size: tuple[int, int]) -> Frame:
    """``image`` shrunk to ``size`` (width, height): halved by pyrDown while that stays
    at least as large, then resized bilinearly (an area filter at a ratio that is not
    a whole number is OpenCV's slow path, 0.14 ms on a face crop)."""
    while image.shape[1] >= 2 * size[0] and image.shape[0] >= 2 * size[1]:
        image = cv2.pyrDown(image)
    if (image.shape[1], image.shape[0]) == size:
        return image
    return np.asarray(cv2.resize(image, size, interpolation=cv2.INTER_LINEAR), image.dtype)


def _support(mask: NDArray[np.float32]) -> NDArray[np.float32]:
    """Where a multiband/Poisson blend may have changed pixels: the mask grown and feathered."""
    grown = cv2.dilate((mask > 0).astype(np.uint8), np.ones((9, 9), np.uint8)).astype(np.float32)
    return np.asarray(cv2.GaussianBlur(grown, (9, 9), 0) * grown, np.float32)


__all__ = [
    "COLOR_MODES",
    "BLEND_MODES",
    "SwapOptions",
    "Swapper",
    "fusion_mix",
    "SourceModel",
    "prepare_source",
    "source_advice",
    "eyes_seen",
]
