"""Tests for faceweave.io.image: formats, conversions, broken files, limits, atomic writes."""

from __future__ import annotations

import errno
import io
import os
import stat
import struct
import threading
import tracemalloc
import zlib
from pathlib import Path

import cv2
import numpy as np
import pytest
from PIL import Image, ImageFile

from faceweave.errors import (
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    OutputError,
    UnsupportedFormatError,
)
from faceweave.io import (
    IMAGE_EXTENSIONS,
    check_output_path,
    image_extension,
    list_images,
    make_output_dir,
    output_path_for,
    read_image,
    write_image,
)
from faceweave.io import image as image_io


def _smooth_frame(height: int = 48, width: int = 64) -> np.ndarray:
    """A smooth colour gradient: lossy codecs reproduce it closely."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    frame = np.stack(
        [255 * x / (width - 1), 255 * y / (height - 1), 128 + 60 * np.sin(x / 9)], axis=2
    )
    return np.rint(frame).astype(np.uint8)


def _noise_frame(height: int = 120, width: int = 160) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def _bomb_png(side: int) -> bytes:
    """A valid 1-bit palette PNG of side x side black pixels, a few hundred KB on disk."""
    header = struct.pack(">IIBBBBB", side, side, 1, 3, 0, 0, 0)  # 1 bit, palette
    compressor = zlib.compressobj(9)
    row = bytes(1 + (side + 7) // 8)  # filter byte 0 + packed zero bits
    block = row * 256
    parts = []
    for start in range(0, side, 256):
        rows = min(256, side - start)
        parts.append(compressor.compress(block if rows == 256 else row * rows))
    parts.append(compressor.flush())
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"PLTE", b"\x00\x00\x00")
        + _png_chunk(b"IDAT", b"".join(parts))
        + _png_chunk(b"IEND", b"")
    )


# --- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("extension", IMAGE_EXTENSIONS)
def test_round_trip_each_format(tmp_path: Path, extension: str) -> None:
    frame = _smooth_frame()
    path = tmp_path / f"image{extension}"
    write_image(path, frame)
    back = read_image(path)
    assert back.dtype == np.uint8
    assert back.shape == frame.shape
    assert back.flags.c_contiguous
    error = np.abs(back.astype(np.int16) - frame.astype(np.int16))
    if extension in (".png", ".bmp", ".tif", ".tiff"):
        assert error.max() == 0
    else:
        assert error.mean() < 2.0
    assert _leftovers(tmp_path) == []


def test_upper_case_extension(tmp_path: Path) -> None:
    frame = _smooth_frame()
    write_image(tmp_path / "IMAGE.PNG", frame)
    np.testing.assert_array_equal(read_image(tmp_path / "IMAGE.PNG"), frame)


def test_read_is_bgr(tmp_path: Path) -> None:
    Image.new("RGB", (4, 3), (255, 0, 0)).save(tmp_path / "red.png")
    frame = read_image(tmp_path / "red.png")
    assert frame.shape == (3, 4, 3)
    assert frame[0, 0].tolist() == [0, 0, 255]


def test_write_accepts_path_string_and_grayscale_frame(tmp_path: Path) -> None:
    gray = _smooth_frame()[:, :, 0]
    write_image(str(tmp_path / "gray.png"), gray)
    back = read_image(str(tmp_path / "gray.png"))
    assert back.shape == (*gray.shape, 3)
    for channel in range(3):
        np.testing.assert_array_equal(back[:, :, channel], gray)


def test_quality_changes_jpeg_size(tmp_path: Path) -> None:
    frame = _noise_frame()
    write_image(tmp_path / "low.jpg", frame, quality=10)
    write_image(tmp_path / "high.jpg", frame, quality=95)
    assert (tmp_path / "low.jpg").stat().st_size < (tmp_path / "high.jpg").stat().st_size


# --- conversions on read ---------------------------------------------------------------------


def test_grayscale_input(tmp_path: Path) -> None:
    gray = _smooth_frame()[:, :, 1]
    Image.fromarray(gray, mode="L").save(tmp_path / "gray.png")
    frame = read_image(tmp_path / "gray.png")
    assert frame.shape == (*gray.shape, 3)
    assert frame.dtype == np.uint8
    for channel in range(3):
        np.testing.assert_array_equal(frame[:, :, channel], gray)


def test_rgba_input_composited_over_white(tmp_path: Path) -> None:
    rgba = np.zeros((10, 10, 4), dtype=np.uint8)
    rgba[:, :5] = (0, 0, 255, 255)  # opaque blue on the left
    rgba[:, 5:] = (0, 0, 0, 0)  # fully transparent black on the right
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "rgba.png")
    frame = read_image(tmp_path / "rgba.png")
    assert frame.shape == (10, 10, 3)
    assert frame[0, 0].tolist() == [255, 0, 0]  # BGR blue
    assert frame[0, 9].tolist() == [255, 255, 255]


def test_half_transparent_pixels_blend(tmp_path: Path) -> None:
    rgba = np.full((2, 2, 4), (0, 0, 0, 128), dtype=np.uint8)
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "half.png")
    frame = read_image(tmp_path / "half.png")
    assert np.all(np.abs(frame.astype(int) - 127) <= 1)


def test_transparency_is_read_apart_and_restored(tmp_path: Path) -> None:
    """The frame is the picture over white; its alpha comes with it, and restore_alpha
    gives the file's picture back (colours within a grey level where at least half
    opaque), which PNG and WebP write with its transparency."""
    from faceweave.io import read_image_and_alpha, restore_alpha

    rng = np.random.default_rng(0)
    rgba = rng.integers(0, 256, (16, 24, 4), dtype=np.uint8)
    rgba[:, :4, 3] = 0
    rgba[:, 4:8, 3] = 255
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "cut_out.png")
    frame, alpha = read_image_and_alpha(tmp_path / "cut_out.png")
    assert alpha is not None
    np.testing.assert_array_equal(alpha, rgba[:, :, 3])
    np.testing.assert_array_equal(frame, read_image(tmp_path / "cut_out.png"))
    assert frame[:, :4].min() == 255  # the transparent band, over white
    back = restore_alpha(frame, alpha)
    assert back.shape == (16, 24, 4)
    np.testing.assert_array_equal(back[:, :, 3], rgba[:, :, 3])
    half = rgba[:, :, 3] >= 128
    error = np.abs(back[:, :, :3].astype(int) - rgba[:, :, 2::-1].astype(int))
    assert error[half].max() <= 1
    assert back[:, :4, :3].max() == 0  # no colour where nothing shows
    for name in ("back.png", "back.webp", "back.tif"):
        write_image(tmp_path / name, back, quality=100)
        stored = np.asarray(Image.open(tmp_path / name))
        assert stored.shape == (16, 24, 4)
        np.testing.assert_array_equal(stored[:, :, 3], rgba[:, :, 3])
    with pytest.raises(InputError, match="alpha"):
        write_image(tmp_path / "back.jpg", back)
    assert not (tmp_path / "back.jpg").exists()
    with pytest.raises(InputError, match="alpha"):
        restore_alpha(frame, alpha[:8])


def test_an_opaque_picture_has_no_alpha(tmp_path: Path) -> None:
    from faceweave.io import read_image_and_alpha

    rgba = np.full((4, 4, 4), 200, np.uint8)
    rgba[:, :, 3] = 255  # an alpha channel, opaque throughout
    Image.fromarray(rgba, mode="RGBA").save(tmp_path / "opaque.png")
    Image.fromarray(rgba[:, :, :3], mode="RGB").save(tmp_path / "rgb.png")
    for name in ("opaque.png", "rgb.png"):
        frame, alpha = read_image_and_alpha(tmp_path / name)
        assert alpha is None and frame.shape == (4, 4, 3)


def test_palette_with_transparency(tmp_path: Path) -> None:
    image = Image.new("P", (4, 4), 0)
    image.putpalette([255, 0, 0, 0, 255, 0] + [0] * 762)
    image.putpixel((3, 3), 1)
    image.save(tmp_path / "palette.png", transparency=1)
    frame = read_image(tmp_path / "palette.png")
    assert frame[0, 0].tolist() == [0, 0, 255]
    assert frame[3, 3].tolist() == [255, 255, 255]


def test_16_bit_grayscale(tmp_path: Path) -> None:
    values = np.array([[0, 257, 32896, 65535]], dtype=np.uint16)
    assert cv2.imwrite(str(tmp_path / "deep.png"), values)
    frame = read_image(tmp_path / "deep.png")
    assert frame.shape == (1, 4, 3)
    assert frame[0, :, 0].tolist() == [0, 1, 128, 255]


def test_16_bit_colour(tmp_path: Path) -> None:
    bgr16 = np.zeros((2, 3, 3), dtype=np.uint16)
    bgr16[..., 0] = 65535  # blue, full
    bgr16[..., 2] = 32896  # red, half
    assert cv2.imwrite(str(tmp_path / "deep.png"), bgr16)
    frame = read_image(tmp_path / "deep.png")
    assert frame.dtype == np.uint8
    assert frame.shape == (2, 3, 3)
    assert np.all(np.abs(frame[0, 0].astype(int) - [255, 0, 128]) <= 1)


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    stored = np.zeros((20, 40, 3), dtype=np.uint8)
    stored[:8, :8] = (255, 0, 0)  # red marker in the stored top-left corner (RGB)
    image = Image.fromarray(stored, mode="RGB")
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    image.save(tmp_path / "rotated.jpg", exif=exif.tobytes(), quality=95)
    frame = read_image(tmp_path / "rotated.jpg")
    assert frame.shape == (40, 20, 3)
    # After a clockwise quarter turn the stored top-left lands at the top-right.
    assert frame[2, 17, 2] > 200 and frame[2, 17, 0] < 60
    assert frame[37, 2, 2] < 60


def test_tiff_variants_read_as_a_viewer_shows_them(tmp_path: Path) -> None:
    """16-bit colour, floating-point grey (0..1 and 0..255), CMYK, a JPEG-compressed
    TIFF and the first page of a multi-page one: all the 8-bit BGR picture."""
    bgr16 = np.zeros((2, 3, 3), dtype=np.uint16)
    bgr16[..., 0] = 65535
    bgr16[..., 2] = 32896
    assert cv2.imwrite(str(tmp_path / "deep.tif"), bgr16)
    assert np.all(np.abs(read_image(tmp_path / "deep.tif")[0, 0].astype(int) - [255, 0, 128]) <= 1)

    unit = np.array([[0.0, 0.5, 1.0, np.nan]], dtype=np.float32)
    assert cv2.imwrite(str(tmp_path / "unit.tif"), unit)
    assert read_image(tmp_path / "unit.tif")[0, :, 1].tolist() == [0, 128, 255, 0]
    bytes_range = np.array([[0.0, 100.0, 255.0, 300.0]], dtype=np.float32)
    assert cv2.imwrite(str(tmp_path / "wide.tif"), bytes_range)
    assert read_image(tmp_path / "wide.tif")[0, :, 1].tolist() == [0, 100, 255, 255]

    Image.new("CMYK", (4, 4), (0, 255, 255, 0)).save(tmp_path / "print.tif")  # red ink
    assert read_image(tmp_path / "print.tif")[0, 0].tolist() == [0, 0, 255]

    smooth = _smooth_frame()
    Image.fromarray(smooth[:, :, ::-1]).save(tmp_path / "jpeg.tif", compression="jpeg")
    assert np.abs(read_image(tmp_path / "jpeg.tif").astype(int) - smooth).mean() < 3.0

    pages = [Image.new("RGB", (5, 4), colour) for colour in ((255, 0, 0), (0, 255, 0))]
    pages[0].save(tmp_path / "pages.tiff", save_all=True, append_images=pages[1:])
    assert read_image(tmp_path / "pages.tiff")[0, 0].tolist() == [0, 0, 255]  # page one


def test_32_bit_integer_grey_tiffs_use_their_full_range(tmp_path: Path) -> None:
    """A scientific camera's 32-bit grey TIFF had been scaled as 16-bit samples: all
    but black came out white, and the swap said "no face"."""
    signed = np.array([[0, 2**30, 2**31 - 1, -5]], dtype=np.int32)
    assert cv2.imwrite(str(tmp_path / "signed.tif"), signed)
    assert read_image(tmp_path / "signed.tif")[0, :, 0].tolist() == [0, 128, 255, 0]
    tifffile = pytest.importorskip("tifffile")  # (scikit-image's; Pillow writes no uint32)
    unsigned = np.array([[0, 2**31, 2**32 - 1]], dtype=np.uint32)
    tifffile.imwrite(tmp_path / "unsigned.tif", unsigned)
    assert read_image(tmp_path / "unsigned.tif")[0, :, 2].tolist() == [0, 128, 255]
    # 16-bit grey in the same "I" family of Pillow's modes stays scaled as 16-bit.
    Image.fromarray(np.array([[0, 32896, 65535]], dtype=np.uint16)).save(tmp_path / "u16.tif")
    assert read_image(tmp_path / "u16.tif")[0, :, 1].tolist() == [0, 128, 255]


def test_tiff_written_with_deflate_and_marked_alpha(tmp_path: Path) -> None:
    from faceweave.io import read_image_and_alpha

    rgba = np.dstack([_smooth_frame(), np.full((48, 64), 77, np.uint8)])
    write_image(tmp_path / "cut.tiff", rgba)
    with Image.open(tmp_path / "cut.tiff") as stored:
        assert stored.format == "TIFF" and stored.mode == "RGBA"
        assert stored.info["compression"] == "tiff_adobe_deflate"
        tags = stored.tag_v2  # type: ignore[attr-defined]
        # Alpha marked as unassociated (other readers show a TIFF without it opaque),
        # Deflate with horizontal differencing.
        assert tags[338] == (2,) and tags[317] == 2
    frame, alpha = read_image_and_alpha(tmp_path / "cut.tiff")
    assert alpha is not None and alpha.min() == alpha.max() == 77
    assert frame.shape == (48, 64, 3)


def test_avif_read_and_written_with_alpha_and_quality(tmp_path: Path) -> None:
    """AVIF (a phone's or a browser's photo) through Pillow's libavif: colour, a
    transparent cut-out's alpha, and --quality, as for WebP."""
    from faceweave.io import read_image_and_alpha

    smooth = _smooth_frame()
    ramp = np.tile(np.linspace(0, 255, 64).astype(np.uint8), (48, 1))
    write_image(tmp_path / "cut.avif", np.dstack([smooth, ramp]))
    with Image.open(tmp_path / "cut.avif") as stored:
        assert stored.format == "AVIF" and stored.mode == "RGBA"
    frame, alpha = read_image_and_alpha(tmp_path / "cut.avif")
    assert alpha is not None and np.abs(alpha.astype(int) - ramp).max() <= 8
    opaque = alpha > 250
    assert np.abs(frame.astype(int) - smooth)[opaque].mean() < 3.0
    noise = _noise_frame()
    write_image(tmp_path / "low.avif", noise, quality=20)
    write_image(tmp_path / "high.avif", noise, quality=95)
    assert (tmp_path / "low.avif").stat().st_size < (tmp_path / "high.avif").stat().st_size


HEIC_DIR = Path(__file__).resolve().parent / "data"  # tools/make_heic_fixtures.py


def _astronaut_crop(size: int = 256) -> np.ndarray:
    """The picture the HEIC test files hold (BGR), from scikit-image's astronaut."""
    skimage_data = pytest.importorskip("skimage.data")
    crop = cv2.cvtColor(skimage_data.astronaut()[:256, 100:356], cv2.COLOR_RGB2BGR)
    return crop if size == 256 else cv2.resize(crop, (size, size), interpolation=cv2.INTER_AREA)


def test_heic_photos_are_read_upright_and_in_8_bits() -> None:
    """An iPhone's HEIC (HEVC in a HEIF box) is read through pi-heif: the picture, its
    rotation applied (a phone held sideways), 10-bit samples brought to 8."""
    expected = _astronaut_crop().astype(np.int16)
    plain = read_image(HEIC_DIR / "astronaut.heic")
    assert plain.shape == (256, 256, 3) and plain.dtype == np.uint8
    assert np.abs(plain - expected).mean() < 6.0
    # Stored a quarter turn clockwise with a rotation that turns it back.
    turned = read_image(HEIC_DIR / "astronaut_rotated.heic")
    assert turned.shape == (256, 256, 3) and np.abs(turned - expected).mean() < 6.0
    assert np.abs(np.rot90(turned, 1) - expected).mean() > 20.0  # not merely symmetric
    deep = read_image(HEIC_DIR / "astronaut_10bit.heic")
    assert deep.shape == (96, 96, 3) and deep.dtype == np.uint8
    small = cv2.resize(plain, (96, 96), interpolation=cv2.INTER_AREA).astype(np.int16)
    assert np.abs(deep - small).mean() < 8.0


def test_a_transparent_heic_keeps_its_alpha() -> None:
    from faceweave.io import read_image_and_alpha

    frame, alpha = read_image_and_alpha(HEIC_DIR / "astronaut_alpha.heic")
    assert alpha is not None and alpha.shape == (96, 96)
    yy, xx = np.mgrid[:96, :96]
    inside = (yy - 47.5) ** 2 + (xx - 47.5) ** 2 <= 36**2
    outside = (yy - 47.5) ** 2 + (xx - 47.5) ** 2 >= 44**2
    assert alpha[inside].min() > 240 and alpha[outside].max() < 15
    assert frame[outside].min() > 240  # over white, as a viewer shows it


def test_broken_heics_say_why(tmp_path: Path) -> None:
    data = (HEIC_DIR / "astronaut.heic").read_bytes()
    (tmp_path / "cut.heic").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="truncated or corrupt"):
        read_image(tmp_path / "cut.heic")
    # A HEIC brand and nothing a decoder can use.
    path = tmp_path / "IMG_0001.HEIC"
    path.write_bytes(b"\x00\x00\x00\x18ftypheic\x00\x00\x00\x00mif1heic" + bytes(200))
    with pytest.raises(InputError, match="truncated or corrupt HEIC: ") as caught:
        read_image(path)
    assert not isinstance(caught.value, UnsupportedFormatError)
    assert "\n" not in str(caught.value)


def test_without_pi_heif_a_heic_photo_is_named_as_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installation without pi-heif says what the file is and what to do, rather
    than "not a supported image"."""
    monkeypatch.setattr(image_io, "_heif_reader", lambda: False)
    with pytest.raises(UnsupportedFormatError, match="HEIC photo.*pi-heif.*JPEG"):
        read_image(HEIC_DIR / "astronaut.heic")


def test_heic_is_read_not_written(tmp_path: Path) -> None:
    """No HEVC encoder: a HEIC output is refused up front, saying what to write
    instead; a folder's HEIC photos are written as JPEG; folders list them."""
    for name in ("out.heic", "out.HEIF"):
        with pytest.raises(UnsupportedFormatError, match="read but not written.*\\.jpg"):
            check_output_path(tmp_path / name)
        with pytest.raises(UnsupportedFormatError, match="read but not written"):
            write_image(tmp_path / name, _smooth_frame())
    assert not list(tmp_path.iterdir())
    assert output_path_for("in/IMG_0001.HEIC", "out") == Path("out/IMG_0001.jpg")
    assert output_path_for("in/a.heif", "out", keep_format=False) == Path("out/a.png")
    (tmp_path / "IMG_0001.HEIC").write_bytes(b"")
    (tmp_path / "b.hif").write_bytes(b"")
    assert [p.name for p in list_images(tmp_path)] == ["IMG_0001.HEIC", "b.hif"]


def test_unreadable_tiffs_say_why(tmp_path: Path) -> None:
    # Floating-point colour: a layout Pillow does not decode, named as such.
    assert cv2.imwrite(str(tmp_path / "hdr.tif"), np.full((4, 4, 3), 0.5, np.float32))
    with pytest.raises(UnsupportedFormatError, match="TIFF sample layout.*8- or 16-bit"):
        read_image(tmp_path / "hdr.tif")
    # Cut in half (its directory, written last, is gone) or garbage after the magic.
    ok, encoded = cv2.imencode(".tif", _noise_frame())
    assert ok
    (tmp_path / "cut.tif").write_bytes(encoded.tobytes()[: encoded.size // 2])
    (tmp_path / "junk.tif").write_bytes(b"MM\x00*" + b"\xff" * 60)
    for name in ("cut.tif", "junk.tif"):
        with pytest.raises(InputError, match="truncated or corrupt TIFF") as info:
            read_image(tmp_path / name)
        assert not isinstance(info.value, UnsupportedFormatError)
        assert "\n" not in str(info.value)


# --- broken and unsupported files ------------------------------------------------------------


def test_truncated_images_stay_refused_by_default() -> None:
    # faceweave relies on Pillow's default; nothing may switch it on globally.
    assert ImageFile.LOAD_TRUNCATED_IMAGES is False


@pytest.mark.parametrize("extension", [".png", ".jpg"])
def test_truncated_file_raises(tmp_path: Path, extension: str) -> None:
    ok, encoded = cv2.imencode(extension, _noise_frame())
    assert ok
    data = encoded.tobytes()
    path = tmp_path / f"cut{extension}"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as info:
        read_image(path)
    message = str(info.value)
    assert str(path) in message
    assert "\n" not in message


def test_non_image_bytes_raise(tmp_path: Path) -> None:
    path = tmp_path / "notes.png"
    path.write_bytes(b"this is not an image at all\n" * 10)
    with pytest.raises(UnsupportedFormatError, match="notes.png"):
        read_image(path)


def test_empty_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "empty.jpg"
    path.write_bytes(b"")
    with pytest.raises(UnsupportedFormatError, match="empty"):
        read_image(path)


def test_corrupt_png_header_raises(tmp_path: Path) -> None:
    path = tmp_path / "header.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 40)
    with pytest.raises(InputError, match="header.png"):
        read_image(path)


def test_other_image_formats_are_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "picture.pcx"
    Image.new("RGB", (8, 8), (1, 2, 3)).save(path)
    with pytest.raises(UnsupportedFormatError):
        read_image(path)


def test_a_gif_is_read_as_its_first_frame(tmp_path: Path) -> None:
    """A GIF avatar as the source photo (as a target, a GIF is an animation)."""
    frames = [Image.new("RGB", (8, 8), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    frames[0].save(tmp_path / "a.gif", save_all=True, append_images=frames[1:])
    assert read_image(tmp_path / "a.gif")[0, 0].tolist() == [0, 0, 255]


def test_missing_file_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_image(tmp_path / "missing.png")


def test_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="directory"):
        read_image(tmp_path)


def _read_error(path: Path | str) -> str:
    """read_image's error message for ``path``, failing the test if it waits."""
    errors: list[str] = []

    def read() -> None:
        try:
            read_image(path)
        except InputError as exc:
            errors.append(str(exc))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(10.0)
    if reader.is_alive():
        with open(path, "wb"):  # a writer comes and goes: the blocked reader is let go
            pass
        pytest.fail(f"read_image waited on {path}")
    return errors[0] if errors else ""


def test_special_files_are_refused_at_once(tmp_path: Path) -> None:
    """A pipe would block until something writes to it, a device never ends."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    assert _read_error(fifo).endswith("not a regular file")
    assert _read_error("/dev/zero").endswith("not a regular file")
    with pytest.raises(InputError, match="cannot read"):
        read_image(tmp_path / ("a" * 300 + ".png"))  # the file system's name limit


def test_special_files_are_no_outputs(tmp_path: Path) -> None:
    """An output named by a pipe, or a link to a device, is refused: the rename had
    put a regular file in its place (exit 0), and nothing reached the pipe. A link to
    a regular file is an output like any other."""
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)
    device = tmp_path / "null.png"
    device.symlink_to("/dev/null")
    frame = np.zeros((8, 8, 3), np.uint8)
    for path in (fifo, device):
        with pytest.raises(OutputError, match="not a regular file"):
            check_output_path(path)
        with pytest.raises(OutputError, match="not a regular file"):
            write_image(path, frame)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and device.is_symlink()
    video = tmp_path / "pipe.mp4"
    os.mkfifo(video)
    with pytest.raises(OutputError, match="not a regular file"):
        check_output_path(video, image=False)
    link = tmp_path / "link.png"
    link.symlink_to(tmp_path / "real.png")
    write_image(tmp_path / "real.png", frame)
    write_image(link, frame + 1)
    assert read_image(link)[0, 0, 0] == 1


def test_bytes_path(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    write_image(path, np.zeros((8, 8, 3), np.uint8))
    assert read_image(os.fsencode(path)).shape == (8, 8, 3)  # type: ignore[arg-type]


def test_output_names_too_long_are_output_errors(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="cannot write"):
        write_image(tmp_path / ("a" * 300 + ".png"), np.zeros((8, 8, 3), np.uint8))
    with pytest.raises(OutputError, match="cannot write"):
        check_output_path(tmp_path / ("a" * 300 + ".png"))


def test_unwritable_batch_folder_fails_up_front(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checked once where the folder is made (root would write anyway: os.access is asked)."""
    monkeypatch.setattr(image_io.os, "access", lambda path, mode: False)
    with pytest.raises(OutputError, match="permission denied"):
        make_output_dir(tmp_path / "out")


def test_errors_are_value_errors_too(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        read_image(tmp_path / "missing.png")
    with pytest.raises(FaceweaveError):
        read_image(tmp_path / "missing.png")


# --- size limits -----------------------------------------------------------------------------


def test_too_large_small_png(tmp_path: Path) -> None:
    path = tmp_path / "small.png"
    write_image(path, _smooth_frame(100, 100))
    with pytest.raises(ImageTooLargeError, match="small.png"):
        read_image(path, max_pixels=100 * 100 - 1)
    assert read_image(path, max_pixels=100 * 100).shape == (100, 100, 3)


@pytest.mark.parametrize("side", [9_000, 20_000])
def test_decompression_bomb_refused_before_decoding(tmp_path: Path, side: int) -> None:
    # 9000^2 is over our default limit but under Pillow's; 20000^2 is over both.
    path = tmp_path / "bomb.png"
    path.write_bytes(_bomb_png(side))
    assert path.stat().st_size < 2_000_000
    tracemalloc.start()
    try:
        with pytest.raises(ImageTooLargeError, match="bomb.png"):
            read_image(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10_000_000  # the pixels alone would be side * side * 3 bytes


# --- writing ---------------------------------------------------------------------------------


def test_write_unsupported_extension(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedFormatError, match="gif"):
        write_image(tmp_path / "out.gif", _smooth_frame())
    with pytest.raises(UnsupportedFormatError):
        write_image(tmp_path / "out", _smooth_frame())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "frame",
    [
        np.zeros((4, 4, 3), dtype=np.float32),
        np.zeros((4, 4, 2), dtype=np.uint8),  # (4 channels: BGRA, for PNG and WebP)
        np.zeros((0, 4, 3), dtype=np.uint8),
    ],
)
def test_write_rejects_bad_frames(tmp_path: Path, frame: np.ndarray) -> None:
    with pytest.raises(InputError):
        write_image(tmp_path / "out.png", frame)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("quality", [0, 101])
def test_write_rejects_bad_quality(tmp_path: Path, quality: int) -> None:
    with pytest.raises(InputError, match="quality"):
        write_image(tmp_path / "out.jpg", _smooth_frame(), quality=quality)


def test_write_leaves_no_temp_files_and_honours_umask(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        write_image(tmp_path / "a.png", _smooth_frame())
        write_image(tmp_path / "a.png", _noise_frame())  # overwrite in place
    finally:
        os.umask(old_umask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png"]
    if os.name == "posix":
        assert (tmp_path / "a.png").stat().st_mode & 0o777 == 0o644
    assert read_image(tmp_path / "a.png").shape == (120, 160, 3)


def test_failed_replace_leaves_no_partial_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_replace(src: object, dst: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(image_io.os, "replace", failing_replace)
    with pytest.raises(OutputError, match="out.png"):
        write_image(tmp_path / "out.png", _smooth_frame())
    assert list(tmp_path.iterdir()) == []


def test_failed_replace_keeps_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "out.png"
    write_image(path, _smooth_frame())
    before = path.read_bytes()

    def failing_replace(src: object, dst: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(image_io.os, "replace", failing_replace)
    with pytest.raises(OutputError):
        write_image(path, _noise_frame())
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.png"]


def test_disk_full_during_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = os.write
    calls = []

    def short_then_full(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data)[:100])  # a short write first
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(image_io.os, "write", short_then_full)
    with pytest.raises(OutputError, match="No space left"):
        write_image(tmp_path / "out.png", _noise_frame())
    assert list(tmp_path.iterdir()) == []


def test_interrupt_during_write_removes_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(fd: int) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(image_io.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_image(tmp_path / "out.png", _smooth_frame())
    assert list(tmp_path.iterdir()) == []


def test_interrupt_as_the_temp_file_is_made_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stop signal can land as os.open returns, before its descriptor is named."""
    real_open = os.open

    def made_then_interrupted(*args: object) -> int:
        os.close(real_open(*args))  # type: ignore[arg-type]
        raise KeyboardInterrupt

    monkeypatch.setattr(image_io.os, "open", made_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_image(tmp_path / "out.png", _smooth_frame())
    assert list(tmp_path.iterdir()) == []


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        write_image(tmp_path / "nope" / "out.png", _smooth_frame())


def test_parent_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="not a directory"):
        write_image(tmp_path / "file" / "out.png", _smooth_frame())


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root ignores permissions"
)
def test_read_only_directory(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(OutputError) as info:
            write_image(locked / "out.png", _smooth_frame())
        assert "\n" not in str(info.value)
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


# --- helpers ---------------------------------------------------------------------------------


def test_image_extension() -> None:
    assert image_extension("a/B.JPEG") == ".jpeg"
    with pytest.raises(UnsupportedFormatError):
        image_extension("a/b.gif")


def test_output_path_for() -> None:
    assert output_path_for("in/face.JPG", "out") == Path("out/face.JPG")
    assert output_path_for(Path("in/face.webp"), Path("out")) == Path("out/face.webp")
    assert output_path_for("in/face.jpg", "out", keep_format=False) == Path("out/face.png")
    assert output_path_for("in/face.tif", "out") == Path("out/face.tif")
    assert output_path_for("in/face.gif", "out") == Path("out/face.png")
    assert output_path_for("in/face.jpg", "out", keep_format=False, default_extension=".bmp") == (
        Path("out/face.bmp")
    )
    with pytest.raises(UnsupportedFormatError):
        output_path_for("in/face.jpg", "out", default_extension=".gif")


def test_list_images(tmp_path: Path) -> None:
    for name in ["b.PNG", "a.jpg", "c.webp", ".hidden.png", "notes.txt", "d.bmp", "e.jpeg"]:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub.png").mkdir()
    names = [p.name for p in list_images(tmp_path)]
    assert names == ["a.jpg", "b.PNG", "c.webp", "d.bmp", "e.jpeg"]
    with pytest.raises(InputError):
        list_images(tmp_path / "a.jpg")


def test_a_write_removes_the_temporary_files_a_killed_writer_left(tmp_path: Path) -> None:
    """``kill -9`` (or a power cut) mid-write leaves ``.<name>.<pid>-<random>.tmp``: the
    next write of that output removes it once its writer is gone and it has not changed
    for STALE_TEMP_S (it had stayed for good). A live writer's file, a recent one, and
    another output's are left alone."""
    import subprocess
    import sys

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead = int(gone.stdout)
    output = tmp_path / "out.png"
    old = image_io.STALE_TEMP_S + 60
    left = tmp_path / f".out.png.{dead}-0badc0de.tmp"
    recent = tmp_path / f".out.png.{dead}-1badc0de.tmp"
    live = tmp_path / f".out.png.{os.getppid()}-2badc0de.tmp"
    other = tmp_path / f".other.png.{dead}-3badc0de.tmp"
    for path in (left, recent, live, other):
        path.write_bytes(b"half a file")
    for path in (left, live, other):
        os.utime(path, (path.stat().st_atime - old, path.stat().st_mtime - old))
    write_image(output, np.zeros((8, 8, 3), np.uint8))
    assert output.exists()
    assert not left.exists()
    assert recent.exists() and live.exists() and other.exists()


def _matrix_profile(primaries: list[tuple[float, float, float]], name: str) -> bytes:
    """A minimal ICC v2 RGB profile: D50 white, the given colourants, gamma 2.2."""
    import struct

    def s15(value: float) -> bytes:
        return struct.pack(">i", round(value * 65536))

    def xyz(x: float, y: float, z: float) -> bytes:
        return b"XYZ " + bytes(4) + s15(x) + s15(y) + s15(z)

    curve = b"curv" + bytes(4) + struct.pack(">IH", 1, round(2.2 * 256)) + bytes(2)
    text = name.encode() + b"\0"
    desc = b"desc" + bytes(4) + struct.pack(">I", len(text)) + text + bytes(4 + 4 + 2 + 1 + 67)
    tags = [
        (b"desc", desc),
        (b"wtpt", xyz(0.9642, 1.0, 0.8249)),
        (b"rXYZ", xyz(*primaries[0])),
        (b"gXYZ", xyz(*primaries[1])),
        (b"bXYZ", xyz(*primaries[2])),
        (b"rTRC", curve),
        (b"gTRC", curve),
        (b"bTRC", curve),
        (b"cprt", b"text" + bytes(4) + b"none\0"),
    ]
    offset, table, data = 128 + 4 + 12 * len(tags), b"", b""
    for signature, body in tags:
        body += bytes(-len(body) % 4)
        table += signature + struct.pack(">II", offset + len(data), len(body))
        data += body
    body = struct.pack(">I", len(tags)) + table + data
    header = (
        struct.pack(">I", 128 + len(body)) + b"lcms" + struct.pack(">I", 0x02100000)
        + b"mntrRGB XYZ " + bytes(12) + b"acsp" + b"APPL" + bytes(12 + 8 + 4)
        + s15(0.9642) + s15(1.0) + s15(0.8249) + bytes(4 + 16 + 28)
    )  # fmt: skip
    assert len(header) == 128
    return header + body


# Adobe RGB (1998)'s colourants, adapted to D50.
_WIDE = [(0.6097, 0.3111, 0.0195), (0.2053, 0.6257, 0.0609), (0.1492, 0.0632, 0.7446)]


@pytest.mark.parametrize("extension", [".png", ".jpg"])
def test_a_picture_in_another_colour_space_is_read_in_srgb(tmp_path: Path, extension: str) -> None:
    """A camera's Adobe RGB photo (a phone's Display P3 alike) is read as the colours a
    viewer shows for it, in sRGB, the space every frame is worked on and written in
    (its profile had been dropped: the output looked flatter than the input, even
    unswapped). An sRGB profile, and one that cannot be read, leave the pixels alone."""
    from PIL import ImageCms

    rng = np.random.default_rng(3)
    rgb = np.repeat(np.repeat(rng.integers(40, 216, (8, 8, 3), np.uint8), 8, 0), 8, 1)
    rgb[:8, :8] = (200, 60, 50)  # a saturated red
    wide = _matrix_profile(_WIDE, "Test wide RGB")
    path = tmp_path / f"wide{extension}"
    Image.fromarray(rgb).save(path, icc_profile=wide, quality=100)
    frame = read_image(path)
    with Image.open(path) as stored:
        raw = np.asarray(stored.convert("RGB"))[:, :, ::-1].astype(int)
        expected = ImageCms.profileToProfile(
            stored,
            ImageCms.ImageCmsProfile(io.BytesIO(wide)),
            ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")),
            outputMode="RGB",
        )
    np.testing.assert_array_equal(frame, np.asarray(expected)[:, :, ::-1])
    # The red, wider in Adobe RGB, is more saturated in sRGB's numbers.
    red = frame[:8, :8].reshape(-1, 3).mean(0)
    assert red[2] - red[1] > raw[:8, :8, 2].mean() - raw[:8, :8, 1].mean() + 10
    # A palette picture with the profile: its colours converted alike.
    palette = tmp_path / "wide_palette.png"
    Image.fromarray(rgb).quantize(64).save(palette, icc_profile=wide)
    with Image.open(palette) as stored:
        raw_palette = np.asarray(stored.convert("RGB"))[:, :, ::-1].astype(int)
    converted = read_image(palette).astype(int)
    assert converted[:8, :8, 2].mean() - raw_palette[:8, :8, 2].mean() > 5
    for profile in (ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes(), b"junk"):
        plain = tmp_path / f"plain{extension}"
        Image.fromarray(rgb).save(plain, icc_profile=profile, quality=100)
        with Image.open(plain) as stored:
            untouched = np.asarray(stored.convert("RGB"))[:, :, ::-1]
        np.testing.assert_array_equal(read_image(plain), untouched)
