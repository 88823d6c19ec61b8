"""Errors the service answers with, and how faceweave's own errors map to HTTP.

Every error a client sees has the body ``{"error": {"code": ..., "message": ...}}``
with a stable machine-readable ``code`` and a one-line human ``message``.
"""

from __future__ import annotations

from faceweave.errors import (
    BackendError,
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    NoFaceError,
    UnsupportedFormatError,
    UsageError,
)

__all__ = ["ENGINE_ERROR_MESSAGE", "ServiceError", "http_status_of"]

# What a client is told when the server's models fail (a model file that loads but
# fails or gives garbage when run): the detail, with the server's paths and the
# runtime's own words, goes to the server's log only.
ENGINE_ERROR_MESSAGE = "the server's swap engine failed on this request (see the server log)"


class ServiceError(FaceweaveError):
    """An error with an HTTP status, a stable code and a message for the client.

    Args:
        status: the HTTP status code (4xx for the client's errors).
        code: short snake_case identifier, e.g. ``"upload_too_large"``.
        message: one line for a person.
        headers: extra response headers (``Retry-After``, ``WWW-Authenticate``).
    """

    def __init__(
        self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


def http_status_of(error: FaceweaveError) -> tuple[int, str]:
    """(HTTP status, error code) for one of faceweave's errors."""
    if isinstance(error, ServiceError):
        return error.status, error.code
    if isinstance(error, ImageTooLargeError):
        return 413, "image_too_large"
    if isinstance(error, UnsupportedFormatError):
        return 415, "unsupported_format"
    if isinstance(error, NoFaceError):
        return 422, "no_face"
    if isinstance(error, UsageError):
        return 422, "bad_option"
    if isinstance(error, InputError):
        return 422, "bad_input"
    if isinstance(error, BackendError):
        return 500, "engine_error"
    return 500, "internal"
