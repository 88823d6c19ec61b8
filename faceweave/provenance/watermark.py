"""Invisible watermark: "synthetic, made by faceweave" plus a job id, hidden in the luma.

Scheme (blind: detection needs neither the original nor the job id):

* **Message**, 112 bits: a magic byte that means "synthetic, faceweave" (format 1), a
  byte giving the id's kind, an 8-byte id and a CRC-32 (seeded with the project key) over
  all of it. Ids of at most 8 UTF-8 bytes are stored as they are; longer ones as the first
  8 bytes of their SHA-256 and reported as ``"#"`` + 16 hex digits (see
  :func:`watermark_id`).
* **Error correction**: a rate-1/3, constraint-length-7 convolutional code (the LTE
  generators 133, 171, 165 octal) with a zero tail, 354 coded bits, decoded by soft-
  decision Viterbi.
* **Two carriers, one per frame size**, both on a grid of cells in normalised
  coordinates (whatever the frame's size and aspect ratio, so a resized copy has the
  same layout), both luma-only (the same delta on B, G and R):

  - **Fine** (frames whose short side is at least :data:`COARSE_BELOW`): spread spectrum
    on a ``GRID`` x ``GRID`` grid. Each cell carries one chip: a keyed pseudo-random ±1
    times the sign of the coded bit it belongs to (a keyed permutation spreads every
    coded bit over ~46 cells across the whole frame). The chip grid is upsampled
    bilinearly to the frame at an RMS amplitude of ``strength`` grey levels, shaped by
    the picture's texture (texture masking: from a quarter of it on flat areas to twice
    it in fine texture, see :data:`MASK_RANGE`; the frame's RMS at most 1.1 times it):
    2.2 gives a PSNR of about 40.4-42 dB.
  - **Coarse** (smaller frames): spread-transform dither modulation (a quantisation
    watermark) on a ``COARSE_GRID`` x ``COARSE_GRID`` grid. Each coded bit owns 2 or 4
    keyed cells, half counted + and half - (so a change of brightness cancels); the
    difference of their mean luma (each cell measured through its box softened by a
    Gaussian of a quarter cell, so that resampling moves the measure little) is moved
    towards the nearest point of a keyed lattice of step 8 grey levels, offset by half a
    step for a coded 1: 80% of the way in frames up to 160 px, 60% from 224 px, times
    ``strength / 2.2`` (distortion compensation). The cell offsets that do it are found
    by a few corrections measured on the marked frame, upsampled bicubically. Why not
    spread spectrum here: a chip must outshout the picture's own variation at the
    cell's scale, hopeless with 32 cells, while a quantisation mark is read against its
    lattice, so only what processing changes counts. PSNR about 39.5 dB at 128 px,
    41 dB at 200 px, 42 dB from 224 px.

* **Detection** tries both carriers (cheap: one area resize of the luma to 128 x 128
  feeds both) and keeps a CRC-valid decode. Fine: luma area-resized to the grid; a
  4-neighbour prediction error removes most of the picture (whitening), normalised by
  its local energy so textured areas do not drown flat ones; correlation with each
  chip's ±1 gives soft bits. Coarse: the same measures as the embedder; the soft bit is
  the cosine of the measure's phase on the lattice.
* **False positives**: a decode is *found* only when the Viterbi-decoded message has the
  magic byte, a valid kind byte (9 of 256) and a matching CRC-32, 44.8 check bits, and
  its codeword agrees with the soft bits at least :data:`MIN_CONFIDENCE` (fine) or
  :data:`MIN_CONFIDENCE_COARSE` (coarse). For an unmarked picture each carrier's decode
  is a random message, so each passes the checks with probability 9 / 2**48 (about
  3e-14); trying two carriers doubles that to about 6e-14 (2**-43.8) per image, or per
  video (soft bits are combined before one decode per carrier). The confidence floor is
  a second, independent guard: about 1 in 1000 random decodes clears it.

Fine cells are ~15 x 8 pixels in a 1080p frame and ~3 in a 400 px one, coarse ones ~4
pixels at 128 px and ~12 at 399 px: low enough in frequency to pass JPEG quality 75 and
a resize by half, down to 128 px frames (64 px after the resize). The fine carrier is
not reliable below 400 px for that pair (a half resize leaves cells under 1.6 px, which
JPEG then blurs), hence :data:`COARSE_BELOW`. The coarse carrier survives a moderate
change of brightness but, read against an absolute lattice, not one of contrast beyond a
few percent; the fine one survives both.

Example:
    >>> marked = embed_watermark(frame, "job-42")  # doctest: +SKIP
    >>> detect_watermark(marked).payload  # doctest: +SKIP
    'job-42'
"""

from __future__ import annotations

import functools
import hashlib
import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import cv2
import numpy as np
from numpy.typing import NDArray

from faceweave.errors import InputError
from faceweave.types import Frame, check_frame, is_real_number

__all__ = [
    "COARSE_BELOW",
    "COARSE_GRID",
    "CODED_BITS",
    "DEFAULT_STRENGTH",
    "GRID",
    "MIN_CONFIDENCE",
    "MIN_CONFIDENCE_COARSE",
    "STATEMENT",
    "WatermarkResult",
    "detect_watermark",
    "detect_watermark_frames",
    "embed_watermark",
    "watermark_id",
]

STATEMENT = "synthetic, faceweave"  # what a found mark asserts
GRID = 128  # cells per side of the fine (spread-spectrum) chip grid
COARSE_GRID = 32  # cells per side of the coarse (quantisation) grid
COARSE_BELOW = 400  # frames whose short side (px) is below this get the coarse mark
DEFAULT_STRENGTH = 2.2  # fine: RMS grey levels added to the luma (shaped), PSNR ~40.4-42 dB
# Normalised correlation between the soft bits and the decoded codeword below which a
# CRC match is still refused. Viterbi always finds some agreement: with Gaussian soft
# bits (fine carrier, unmarked picture) it scores 0.565 +- 0.010, and 0.60 is passed by
# ~1 decode in 1000; correctly decoded fine marks scored >= 0.62 even after JPEG q30, a
# 0.25x resize or blur + JPEG + half resize. A second, independent guard behind the
# 44.8 check bits.
MIN_CONFIDENCE = 0.60
# The coarse carrier's soft bits (cosines of a uniform phase when unmarked) are bimodal,
# so random decodes agree more: 0.590 +- 0.010; 0.63 keeps the same ~1 in 1000. Coarse
# marks on 128-399 px frames after JPEG q75 and a half resize (either order) scored
# >= 0.75 (5th percentile 0.85).
MIN_CONFIDENCE_COARSE = 0.63
# Texture masking of the fine mark (see _masking_gain). At one amplitude everywhere it
# showed as a faint mottle on flat areas (a wall, a clear sky, a background out of
# focus, smooth skin), where the eye sees a grey level's change, and hid in texture:
# its amplitude now follows the picture's fine contrast, measured on a grid of
# MASK_SIDE samples a side (in the chips' normalised layout) over MASK_WINDOW of them:
# the luma's deviation from its 3 x 3 mean, as an RMS, over MASK_REFERENCE grey levels,
# to the power MASK_POWER, within MASK_RANGE; the whole frame's RMS at most
# MASK_RMS_MOST times ``strength`` (PSNR >= ~40.4 dB at 2.2). On the watermark
# benchmark's photos of 400 px and more the mark on flat pixels fell from 2.10 to 1.09
# grey levels RMS (median); the weakest decode after JPEG, resizes and WebP from 0.738
# to 0.724 (floor 0.60; the 5th percentile from 0.780 to 0.776).
MASK_SIDE = 2 * GRID
MASK_WINDOW = 5
MASK_REFERENCE = 2.0
MASK_POWER = 1.0
MASK_RANGE = (0.25, 2.0)
MASK_RMS_MOST = 1.1

_KEY = b"faceweave provenance watermark v1"  # public: this is a label, not a secret
_MAGIC = 0xF5  # "synthetic, faceweave", message format 1
_ID_BYTES = 8
_HASHED = 0x10  # kind byte of a hashed id; raw ids use 0x11..0x18 (0x10 + length)
_MESSAGE_BITS = (2 + _ID_BYTES + 4) * 8
_CONSTRAINT = 7
_GENERATORS = (0o133, 0o171, 0o165)
_TAIL = _CONSTRAINT - 1
CODED_BITS = (_MESSAGE_BITS + _TAIL) * len(_GENERATORS)
_MIN_UPSCALE = 1.0  # below this, chips are area-averaged into the frame, not stretched
# Coarse carrier. The step is fixed (the blind detector must know it); strength goes
# into the distortion compensation instead (the share of the way to the lattice point).
_COARSE_STEP = 8.0  # grey levels between lattice points of one bit value
_COARSE_SIGMA = 0.25  # Gaussian softening of each cell's box, in cells
_COARSE_OVERSAMPLE = 4  # sub-cells per cell side when measuring (2 for frames < 128 px)
_COARSE_SHARE = ((160, 0.8), (224, 0.6))  # (short side, share): linear in between
_COARSE_ITERATIONS = 5  # embedding corrections (each re-measures the marked frame)
_COARSE_GAIN = 1.5  # ~1 / a cell's measure's response to its own offset (0.6-0.66)


@dataclass(frozen=True)
class WatermarkResult:
    """What :func:`detect_watermark` finds.

    Attributes:
        found: a faceweave mark was decoded (magic, kind and CRC match, confidence
            at least :data:`MIN_CONFIDENCE`, or :data:`MIN_CONFIDENCE_COARSE` for the
            coarse carrier).
        payload: the job id as :func:`watermark_id` reports it; None when not found.
        confidence: normalised correlation in [-1, 1] between the detector's soft bits
            and the decoded codeword: about 0.9 for an untouched mark, >= 0.65 after
            JPEG q75 + half resize, 0.54-0.64 for unmarked images (the decoder always
            finds the best-fitting codeword; their message then fails the CRC). When
            nothing is found, that of the carrier that came closest.
        bit_errors: coded bits whose hard decision disagrees with the decoded
            codeword, out of :attr:`coded_bits`.
        coded_bits: length of the codeword (:data:`CODED_BITS`).
        frames: frames whose soft bits were combined (1 for an image).
        frames_found: of those, frames that decoded on their own.
        grid: the carrier this result comes from: :data:`GRID` (fine) or
            :data:`COARSE_GRID` (coarse).
    """

    found: bool
    payload: str | None
    confidence: float
    bit_errors: int
    coded_bits: int = CODED_BITS
    frames: int = 1
    frames_found: int = 0
    grid: int = GRID

    @property
    def statement(self) -> str | None:
        """``"synthetic, faceweave"`` when a mark was found, else None."""
        return STATEMENT if self.found else None


# --- public API ------------------------------------------------------------------------------


def watermark_id(job_id: bytes | str) -> str:
    """The id a mark made for ``job_id`` reports: itself when short, else a hash.

    Ids of at most 8 UTF-8 bytes (without NUL) come back unchanged; longer ones as
    ``"#"`` + the first 16 hex digits of their SHA-256.

    Raises:
        InputError: ``job_id`` is empty.

    Example:
        >>> watermark_id("job-42")
        'job-42'
        >>> watermark_id("2f1c9a1e-long-job-identifier")
        '#5ce7a6b6d251603a'
    """
    kind, field = _id_field(job_id)
    return _report_id(kind, field)


def embed_watermark(
    frame: Frame, payload: bytes | str, *, strength: float = DEFAULT_STRENGTH
) -> Frame:
    """Add the faint mark for ``payload`` (a job id) to a frame.

    Frames whose short side is at least :data:`COARSE_BELOW` get the fine mark, smaller
    ones the coarse mark (see the module docs); detection finds either.

    Args:
        frame: the picture.
        payload: the job id; see :func:`watermark_id` for what detection reports.
        strength: fine mark: RMS amplitude in grey levels where the picture has a
            typical texture, shaped by it (2.2: PSNR ~40.4-42 dB). Coarse
            mark: scales the distortion compensation (2.2: PSNR ~39.5 dB at 128 px,
            ~42 dB from 224 px); it saturates at ~2.8 (128-160 px) to ~3.7 (224 px and
            up), and by ~1.0 even an untouched mark is lost. Higher survives harsher
            processing and shows more.

    Returns:
        A new marked frame.

    Shape:
        - frame: :math:`(H, W, 3)`, ``uint8``, BGR.
        - Output: same.

    Raises:
        InputError: bad frame, empty payload or non-positive strength.

    Example:
        >>> marked = embed_watermark(frame, "job-42")  # doctest: +SKIP
    """
    check_frame(frame)
    if not is_real_number(strength) or not 0 < strength < math.inf:
        raise InputError(f"strength must be a positive finite number, got {strength!r}")
    message = _message_bytes(payload)
    if min(frame.shape[:2]) < COARSE_BELOW:
        return _embed_coarse(frame, _encode_message(message), strength)
    height, width = frame.shape[:2]
    chips, scale = _fine_chips(message, height, width)
    gain = cv2.resize(
        _masking_gain(frame, (min(MASK_SIDE, width), min(MASK_SIDE, height))),
        (GRID, GRID),
        interpolation=cv2.INTER_AREA,
    )
    # Each cell's chip times its amplitude, as a byte offset by 128: rounded with a
    # keyed dither (a faint cell's fraction of a grey level is kept on average, not
    # rounded away or up to a whole one), then stretched to the frame as the chips'
    # pattern always was (bilinear; area-averaged into a frame under GRID px).
    offset = cv2.multiply(chips, gain, scale=float(strength) * scale)
    offset = np.clip(np.floor(offset + _dither()), 0.0, 255.0).astype(np.uint8)
    marked: Frame = cv2.resize(
        cv2.merge([offset, offset, offset]), (width, height), interpolation=_stretch(height, width)
    )
    # Added in place: one frame-sized buffer a call, as the unshaped mark's add had (a
    # second one, fresh each frame, cost a video's 1080p frames 2-4 ms in page faults).
    cv2.addWeighted(frame, 1.0, marked, 1.0, -128.0, dst=marked)
    return marked


def _stretch(height: int, width: int) -> int:
    """How the chip grid is resized to a frame of that size."""
    return cv2.INTER_LINEAR if min(height, width) / GRID >= _MIN_UPSCALE else cv2.INTER_AREA


@functools.lru_cache(maxsize=2)
def _fine_chips(message: bytes, height: int, width: int) -> tuple[NDArray[np.float32], float]:
    """(GRID, GRID) float32 fine chips (±1: a keyed sign times the sign of the coded bit
    each cell carries; read-only) and the factor that gives their pattern stretched to a
    frame of that size unit RMS (cached per message and size)."""
    signs, assignment = _layout()
    bit_signs = 1.0 - 2.0 * _encode_message(message).astype(np.float32)
    chips = (signs * bit_signs[assignment]).reshape(GRID, GRID)
    chips.flags.writeable = False
    pattern = cv2.resize(chips, (width, height), interpolation=_stretch(height, width))
    # Bilinear chips lose energy between cell centres; measure it on a subsample (fast).
    rms = float(np.sqrt(np.mean(np.square(pattern[::3, ::3], dtype=np.float32))))
    return chips, 1.0 / max(rms, 1e-6)


@functools.lru_cache(maxsize=1)
def _dither() -> NDArray[np.float32]:
    """(GRID, GRID) float32: 128 plus a keyed threshold in [0, 1) per cell (read-only)."""
    seed = int.from_bytes(hashlib.sha256(_KEY + b" dither").digest()[:8], "big")
    thresholds = np.random.default_rng(seed).random((GRID, GRID), dtype=np.float32)
    dither: NDArray[np.float32] = thresholds + np.float32(128.0)
    dither.flags.writeable = False
    return dither


def _masking_gain(frame: Frame, size: tuple[int, int]) -> NDArray[np.float32]:
    """(h, w) float32 amplitude of the fine mark on a ``size = (w, h)`` grid of the
    frame's samples (nearest, so that fine texture and grain count): their deviation
    from their 3 x 3 mean, as an RMS over MASK_WINDOW samples (a smooth gradient is not
    texture), over MASK_REFERENCE, to the power MASK_POWER, within MASK_RANGE, smoothed;
    scaled down where the whole frame's RMS would pass MASK_RMS_MOST."""
    samples = cv2.resize(frame, size, interpolation=cv2.INTER_NEAREST)
    luma = cv2.cvtColor(samples, cv2.COLOR_BGR2GRAY).astype(np.float32)
    window = (MASK_WINDOW, MASK_WINDOW)
    residual = luma - cv2.blur(luma, (3, 3))
    contrast = np.sqrt(cv2.blur(residual * residual, window)) * np.float32(1.0 / MASK_REFERENCE)
    low, high = MASK_RANGE
    gain = np.clip(cv2.pow(contrast, MASK_POWER), low, high)
    gain = cv2.blur(gain, window)
    rms = float(np.sqrt(np.mean(gain * gain)))
    if rms > MASK_RMS_MOST:
        gain *= np.float32(MASK_RMS_MOST / rms)
    result: NDArray[np.float32] = gain
    return result


def detect_watermark(frame: Frame) -> WatermarkResult:
    """Look for a faceweave mark in a frame; needs neither the original nor the id.

    Shape:
        - frame: :math:`(H, W, 3)`, ``uint8``, BGR (any size; it may have been
          re-encoded or resized since it was marked).

    Raises:
        InputError: not a uint8 (H, W, 3) image.
    """
    check_frame(frame)
    fine, coarse = _soft_bits_both(frame)
    return _best(_decide(fine), _decide(coarse, grid=COARSE_GRID))


def detect_watermark_frames(frames: Iterable[Frame]) -> WatermarkResult:
    """Look for a mark across several frames of one video.

    The frames' soft bits are added before decoding (soft combining: better than a
    majority vote of per-frame decisions, since frames too damaged to decode alone
    still help); :attr:`WatermarkResult.frames_found` counts the frames that decode
    on their own, as a vote for the report.

    Raises:
        InputError: no frames, or a bad frame.
    """
    fine_total = np.zeros(CODED_BITS, np.float64)
    coarse_total = np.zeros(CODED_BITS, np.float64)
    count = 0
    votes = 0
    for frame in frames:
        check_frame(frame)
        fine, coarse = _soft_bits_both(frame)
        fine_total += fine
        coarse_total += coarse
        count += 1
        votes += int(_best(_decide(fine), _decide(coarse, grid=COARSE_GRID)).found)
    if count == 0:
        raise InputError("no frames to look for a watermark in")
    scale = 1.0 / np.sqrt(count)
    combined = _best(_decide(fine_total * scale), _decide(coarse_total * scale, grid=COARSE_GRID))
    return WatermarkResult(
        found=combined.found,
        payload=combined.payload,
        confidence=combined.confidence,
        bit_errors=combined.bit_errors,
        frames=count,
        frames_found=votes,
        grid=combined.grid,
    )


# --- message ---------------------------------------------------------------------------------


def _id_field(job_id: bytes | str) -> tuple[int, bytes]:
    if not isinstance(job_id, str | bytes | bytearray | memoryview):
        # (bytes(7) would be seven NUL bytes: a job number's mark had read as a hash)
        raise InputError(
            f"the watermark payload (job id) must be a str or bytes, got {type(job_id).__name__}"
        )
    raw = job_id.encode("utf-8") if isinstance(job_id, str) else bytes(job_id)
    if not raw:
        raise InputError("the watermark payload (job id) must not be empty")
    if len(raw) <= _ID_BYTES and b"\0" not in raw and _is_utf8(raw):
        return _HASHED + len(raw), raw.ljust(_ID_BYTES, b"\0")
    return _HASHED, hashlib.sha256(raw).digest()[:_ID_BYTES]


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _report_id(kind: int, field: bytes) -> str:
    if kind == _HASHED:
        return "#" + field.hex()
    return field[: kind - _HASHED].decode("utf-8", errors="replace")


def _crc(data: bytes) -> int:
    return zlib.crc32(data, zlib.crc32(_KEY))


def _message_bytes(payload: bytes | str) -> bytes:
    kind, field = _id_field(payload)
    body = bytes([_MAGIC, kind]) + field
    return body + _crc(body).to_bytes(4, "big")


def _parse_message(message: bytes) -> str | None:
    body, crc = message[:-4], int.from_bytes(message[-4:], "big")
    kind = body[1]
    if body[0] != _MAGIC or not _HASHED <= kind <= _HASHED + _ID_BYTES or _crc(body) != crc:
        return None
    return _report_id(kind, body[2:])


# --- convolutional code ----------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _trellis() -> tuple[NDArray[np.int8], NDArray[np.int64]]:
    """(outputs (S, 2, R) in {0, 1}, next state (S, 2)); the newest bit enters at the top."""
    states = 1 << (_CONSTRAINT - 1)
    outputs = np.zeros((states, 2, len(_GENERATORS)), np.int8)
    following = np.zeros((states, 2), np.int64)
    for state in range(states):
        for bit in (0, 1):
            register = (bit << (_CONSTRAINT - 1)) | state
            outputs[state, bit] = [bin(register & g).count("1") & 1 for g in _GENERATORS]
            following[state, bit] = register >> 1
    return outputs, following


def _encode_message(message: bytes) -> NDArray[np.int8]:
    outputs, following = _trellis()
    bits = np.unpackbits(np.frombuffer(message, np.uint8))
    coded = np.empty((bits.size + _TAIL, len(_GENERATORS)), np.int8)
    state = 0
    for t, bit in enumerate([*bits.tolist(), *([0] * _TAIL)]):
        coded[t] = outputs[state, bit]
        state = int(following[state, bit])
    return coded.ravel()


def _viterbi(soft: NDArray[np.float64]) -> bytes:
    """Soft-decision decoding; ``soft > 0`` favours a coded 0. Ends in state 0 (the tail)."""
    outputs, _ = _trellis()
    states = outputs.shape[0]
    steps = soft.reshape(-1, len(_GENERATORS))
    signs = (1.0 - 2.0 * outputs).astype(np.float64)  # (S, 2, R)
    # State n is reached from (n << 1 | low) & mask with input bit n >> (K - 2).
    targets = np.arange(states)
    bit_in = targets >> (_CONSTRAINT - 2)
    from_even = (targets << 1) & (states - 1)
    from_odd = from_even | 1
    metric = np.full(states, -np.inf)
    metric[0] = 0.0
    history = np.zeros((steps.shape[0], states), np.int64)
    for t, step in enumerate(steps):
        gain = signs @ step  # (S, 2)
        even = metric[from_even] + gain[from_even, bit_in]
        odd = metric[from_odd] + gain[from_odd, bit_in]
        history[t] = odd > even
        metric = np.maximum(even, odd)
    state = 0
    bits = np.empty(steps.shape[0], np.uint8)
    for t in range(steps.shape[0] - 1, -1, -1):
        bits[t] = state >> (_CONSTRAINT - 2)
        state = ((state << 1) & (states - 1)) | int(history[t, state])
    return np.packbits(bits[:_MESSAGE_BITS]).tobytes()


# --- chips -----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _layout() -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """(pseudo-random ±1 per cell, coded bit of each cell), both flat (GRID * GRID,).

    Derived from the constant key only, so it is computed once and memoised (a pure
    function of constants, not hidden state).
    """
    seed = int.from_bytes(hashlib.sha256(_KEY).digest()[:8], "big")
    rng = np.random.default_rng(seed)
    cells = GRID * GRID
    signs = rng.choice(np.array([-1.0, 1.0], np.float32), cells)
    assignment = np.empty(cells, np.int64)
    assignment[rng.permutation(cells)] = np.arange(cells) % CODED_BITS
    return signs, assignment


def _add_luma(frame: Frame, delta: NDArray[np.float32]) -> Frame:
    """``frame`` + ``delta`` on B, G and R alike (luma-only: the colour stays), saturated."""
    marked = cv2.add(frame, cv2.merge([delta, delta, delta]), dtype=cv2.CV_8U)
    result: Frame = marked
    return result


def _luma(frame: Frame) -> NDArray[np.float32]:
    luma = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY).astype(np.float32)
    result: NDArray[np.float32] = luma
    return result


def _area(image: NDArray[np.float32], side: int) -> NDArray[np.float32]:
    resized: NDArray[np.float32] = cv2.resize(image, (side, side), interpolation=cv2.INTER_AREA)
    return resized


def _soft_bits_both(frame: Frame) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(fine, coarse) soft bits; one area resize of the luma serves both when it can."""
    luma = _luma(frame)
    fine_grid = _area(luma, GRID)
    oversample = _coarse_oversample(min(frame.shape[:2]))
    side = COARSE_GRID * oversample
    coarse_base = fine_grid if side == GRID else _area(luma, side)
    coarse = _coarse_project(_coarse_cells_from(coarse_base, oversample))
    return _fine_soft(fine_grid), _coarse_soft(coarse)


def _fine_soft(grid: NDArray[np.float32]) -> NDArray[np.float64]:
    """(CODED_BITS,) correlations, unit standard deviation; > 0 favours a coded 0."""
    signs, assignment = _layout()
    # Prediction error against the 4 neighbours: removes the smooth picture content.
    kernel = np.array([[0, -0.25, 0], [-0.25, 1, -0.25], [0, -0.25, 0]], np.float32)
    residual = cv2.filter2D(grid, -1, kernel, borderType=cv2.BORDER_REFLECT)
    energy = np.sqrt(np.maximum(cv2.blur(residual * residual, (5, 5)), 0.0))
    weighted = residual / (energy + 1.0)
    products = (weighted.ravel() * signs).astype(np.float64)
    sums = np.bincount(assignment, weights=products, minlength=CODED_BITS)
    soft = np.asarray(sums, dtype=np.float64)  # float already; the stubs say intp
    spread = float(np.std(soft))
    return soft / spread if spread > 0 else soft


# --- coarse carrier: spread-transform dither modulation ---------------------------------------


@functools.lru_cache(maxsize=1)
def _coarse_layout() -> tuple[
    NDArray[np.float64], NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]
]:
    """(±1 per cell, coded bit of each cell, lattice dither per bit in [0, 1), cells per bit).

    Every cell serves one coded bit: 158 bits own 4 cells and 196 own 2, half of them
    counted + and half -, so a bit's measure is a difference of means that a change of
    brightness leaves alone. Keyed like :func:`_layout` (constants only, memoised).
    """
    seed = int.from_bytes(hashlib.sha256(_KEY + b" coarse").digest()[:8], "big")
    rng = np.random.default_rng(seed)
    cells = COARSE_GRID * COARSE_GRID
    fours = (cells - 2 * CODED_BITS) // 2
    counts = np.array([4] * fours + [2] * (CODED_BITS - fours), np.int64)
    rng.shuffle(counts)
    bits = np.repeat(np.arange(CODED_BITS), counts)
    balanced = [rng.permutation(np.array([1.0, -1.0] * (int(n) // 2))) for n in counts]
    order = rng.permutation(cells)
    assignment = np.empty(cells, np.int64)
    signs = np.empty(cells, np.float64)
    assignment[order] = bits
    signs[order] = np.concatenate(balanced)
    dither = rng.random(CODED_BITS)
    return signs, assignment, dither, counts.astype(np.float64)


def _coarse_oversample(short_side: int) -> int:
    """Sub-cells per cell side: 4, or 2 for frames under 128 px (no stretching below that)."""
    return int(min(_COARSE_OVERSAMPLE, max(2, short_side // COARSE_GRID)))


def _coarse_cells_from(base: NDArray[np.float32], oversample: int) -> NDArray[np.float64]:
    """Cell measures from the luma area-resized to ``COARSE_GRID * oversample`` a side."""
    soft = cv2.GaussianBlur(base, (0, 0), _COARSE_SIGMA * oversample, borderType=cv2.BORDER_REFLECT)
    cells = _area(soft, COARSE_GRID).astype(np.float64).ravel()
    result: NDArray[np.float64] = cells
    return result


def _coarse_project(cells: NDArray[np.float64]) -> NDArray[np.float64]:
    """(CODED_BITS,) signed means of each bit's cells, in grey levels."""
    signs, assignment, _, counts = _coarse_layout()
    sums = np.bincount(assignment, weights=signs * cells, minlength=CODED_BITS)
    return np.asarray(sums, dtype=np.float64) / counts


def _coarse_measures(luma: NDArray[np.float32]) -> NDArray[np.float64]:
    oversample = _coarse_oversample(min(luma.shape[:2]))
    base = _area(luma, COARSE_GRID * oversample)
    return _coarse_project(_coarse_cells_from(base, oversample))


def _coarse_soft(measures: NDArray[np.float64]) -> NDArray[np.float64]:
    """(CODED_BITS,) cosines of each measure's phase on its lattice; > 0 favours a coded 0."""
    dither = _coarse_layout()[2]
    soft: NDArray[np.float64] = np.cos(2.0 * np.pi * (measures / _COARSE_STEP - dither))
    return soft


def _coarse_share(short_side: int, strength: float) -> float:
    (low, high_share), (high, low_share) = _COARSE_SHARE
    t = min(1.0, max(0.0, (short_side - low) / (high - low)))
    share = high_share + t * (low_share - high_share)
    return min(1.0, share * strength / DEFAULT_STRENGTH)


def _coarse_pattern(offsets: NDArray[np.float64], height: int, width: int) -> NDArray[np.float32]:
    """Cell offsets upsampled bicubically to the frame (smooth: no edges at the cells)."""
    cells = offsets.reshape(COARSE_GRID, COARSE_GRID).astype(np.float32)
    pattern: NDArray[np.float32] = cv2.resize(cells, (width, height), interpolation=cv2.INTER_CUBIC)
    return pattern


def _embed_coarse(frame: Frame, codeword: NDArray[np.int8], strength: float) -> Frame:
    """Move each bit's measure towards the nearest point of its bit value's lattice.

    The pattern that does it is found by a few corrections, each measured on the marked
    8-bit frame as the detector will see it (rounding and saturation included).
    """
    signs, assignment, dither, _ = _coarse_layout()
    height, width = frame.shape[:2]
    start = _coarse_measures(_luma(frame))
    offset = (dither + 0.5 * codeword.astype(np.float64)) * _COARSE_STEP
    nearest = offset + _COARSE_STEP * np.round((start - offset) / _COARSE_STEP)
    target = start + _coarse_share(min(height, width), strength) * (nearest - start)
    offsets = np.zeros(COARSE_GRID * COARSE_GRID, np.float64)
    marked = frame
    for _ in range(_COARSE_ITERATIONS):
        error = target - _coarse_measures(_luma(marked))
        offsets += _COARSE_GAIN * signs * error[assignment]
        # Saturated cells do not respond; bound what piles up there.
        np.clip(offsets, -_COARSE_STEP, _COARSE_STEP, out=offsets)
        marked = _add_luma(frame, _coarse_pattern(offsets, height, width))
    return marked


# --- decisions -------------------------------------------------------------------------------


def _decide(soft: NDArray[np.float64], grid: int = GRID) -> WatermarkResult:
    floor = MIN_CONFIDENCE if grid == GRID else MIN_CONFIDENCE_COARSE
    message = _viterbi(soft)
    codeword_signs = 1.0 - 2.0 * _encode_message(message).astype(np.float64)
    norm = float(np.linalg.norm(soft)) * np.sqrt(CODED_BITS)
    confidence = float(soft @ codeword_signs) / norm if norm > 0 else 0.0
    payload = _parse_message(message)
    if payload is None and confidence >= floor:
        # A mark read as marked whose best path fails its CRC: the true message is
        # most often a short burst of bits off it (see _near_valid_message).
        near = _near_valid_message(soft, message)
        if near is not None:
            message = near
            codeword_signs = 1.0 - 2.0 * _encode_message(message).astype(np.float64)
            confidence = float(soft @ codeword_signs) / norm
            payload = _parse_message(message)
    bit_errors = int(np.count_nonzero(np.sign(soft) != codeword_signs))
    found = payload is not None and bool(confidence >= floor)  # not numpy's bool_
    return WatermarkResult(
        found=found,
        payload=payload if found else None,
        confidence=confidence,
        bit_errors=bit_errors,
        frames_found=int(found),
        grid=grid,
    )


# Near the decoder's best path: bursts of up to BURST message bits flipped, from each
# bit on (the code's errors come in bursts as long as its memory). JPEG at 75 and a
# half resize left the astronaut's mark for about 1 job id in 150 a path 2 to 4 bits
# off the true one, which scored a little higher and failed its CRC.
_BURST = _CONSTRAINT - 1


@functools.lru_cache(maxsize=1)
def _bursts() -> NDArray[np.bool_]:
    """(N, _MESSAGE_BITS) the flip patterns: each a burst starting at its first bit."""
    patterns = []
    for start in range(_MESSAGE_BITS):
        for rest in range(1 << (_BURST - 1)):
            flips = [start] + [start + 1 + j for j in range(_BURST - 1) if rest >> j & 1]
            if flips[-1] < _MESSAGE_BITS:
                row = np.zeros(_MESSAGE_BITS, bool)
                row[flips] = True
                patterns.append(row)
    return np.asarray(patterns)


def _near_valid_message(soft: NDArray[np.float64], message: bytes) -> bytes | None:
    """The message a burst off ``message`` whose CRC holds and whose codeword agrees
    best with ``soft``; None when none does (about 3,600 candidates; a false one's
    CRC holds about once in a million searches, and its codeword must still pass the
    confidence floor)."""
    bits = np.unpackbits(np.frombuffer(message, np.uint8)).astype(bool)
    candidates = np.packbits(bits[None, :] ^ _bursts(), axis=1)
    kinds = candidates[:, 1]
    plausible = (candidates[:, 0] == _MAGIC) & (kinds >= _HASHED) & (kinds <= _HASHED + _ID_BYTES)
    best: tuple[float, bytes] | None = None
    for row in candidates[plausible]:
        data = row.tobytes()
        if _crc(data[:-4]) != int.from_bytes(data[-4:], "big"):
            continue
        score = float(soft @ (1.0 - 2.0 * _encode_message(data).astype(np.float64)))
        if best is None or score > best[0]:
            best = (score, data)
    return None if best is None else best[1]


def _best(*results: WatermarkResult) -> WatermarkResult:
    """A found result (the most confident), else the one that came closest to its floor."""

    def margin(result: WatermarkResult) -> float:
        floor = MIN_CONFIDENCE if result.grid == GRID else MIN_CONFIDENCE_COARSE
        return result.confidence - floor

    return max(results, key=lambda r: (r.found, margin(r)))
