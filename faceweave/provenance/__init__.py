"""Provenance on every output: a faint watermark plus metadata labels.

* :mod:`~faceweave.provenance.watermark`: embed and detect a blind watermark that says
  "synthetic, faceweave" and carries the job id; survives JPEG q75 and a half resize.
* :mod:`~faceweave.provenance.labels`: PNG text / XMP / EXIF labels for images (XMP
  for animated WebP and APNG, an XMP comment for GIF), container metadata for video,
  written atomically.
* :mod:`~faceweave.provenance.verify`: what ``faceweave verify FILE`` reports.
"""

from faceweave.provenance.labels import (
    DIGITAL_SOURCE_TYPE,
    image_labels,
    labels_xmp,
    read_labels,
    video_metadata,
    write_labeled_image,
)
from faceweave.provenance.verify import VerifyReport, format_report, verify
from faceweave.provenance.watermark import (
    DEFAULT_STRENGTH,
    STATEMENT,
    WatermarkResult,
    detect_watermark,
    detect_watermark_frames,
    embed_watermark,
    watermark_id,
)

__all__ = [
    "DEFAULT_STRENGTH",
    "DIGITAL_SOURCE_TYPE",
    "STATEMENT",
    "VerifyReport",
    "WatermarkResult",
    "detect_watermark",
    "detect_watermark_frames",
    "embed_watermark",
    "format_report",
    "image_labels",
    "labels_xmp",
    "read_labels",
    "verify",
    "video_metadata",
    "watermark_id",
    "write_labeled_image",
]
