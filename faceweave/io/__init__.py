"""Input and output: images here; video, camera and streams in their modules.

numpy conversion happens here only: everything returned is a
:data:`~faceweave.types.Frame` (``uint8`` BGR).
"""

from faceweave.io.image import (
    ALPHA_EXTENSIONS,
    DEFAULT_MAX_PIXELS,
    DEFAULT_QUALITY,
    HEIF_EXTENSIONS,
    IMAGE_EXTENSIONS,
    READ_IMAGE_EXTENSIONS,
    check_output_path,
    image_extension,
    keep_alpha,
    list_images,
    make_output_dir,
    output_path_for,
    read_image,
    read_image_and_alpha,
    restore_alpha,
    same_file,
    write_bytes_atomic,
    write_image,
)

__all__ = [
    "ALPHA_EXTENSIONS",
    "DEFAULT_MAX_PIXELS",
    "DEFAULT_QUALITY",
    "HEIF_EXTENSIONS",
    "IMAGE_EXTENSIONS",
    "READ_IMAGE_EXTENSIONS",
    "check_output_path",
    "image_extension",
    "keep_alpha",
    "list_images",
    "make_output_dir",
    "output_path_for",
    "read_image",
    "read_image_and_alpha",
    "restore_alpha",
    "same_file",
    "write_bytes_atomic",
    "write_image",
]
