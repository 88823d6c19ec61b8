"""Errors the service answers with, and how faceweave's own errors map to HTTP.

Every error a client sees has the body ``{"error": {"code": ..., "message": ...}}``
with a stable machine-readable ``code`` and a one-line human ``message``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from faceweave.errors import (
    BackendError,
    FaceweaveError,
    ImageTooLargeError,
    InputError,
    NoFaceError,
    UnsupportedFormatError,
    UsageError,
)

__all__ = [
    "ENGINE_ERROR_MESSAGE",
    "ErrorBody",
    "ErrorResponse",
    "ServiceError",
    "error_responses",
    "http_status_of",
]

# What a client is told when the server's models fail (a model file that loads but
# fails or gives garbage when run): the detail, with the server's paths and the
# runtime's own words, goes to the server's log only.
ENGINE_ERROR_MESSAGE = "the server's swap engine failed on this request (see the server log)"


class ErrorBody(BaseModel):
    code: str = Field(description="stable machine-readable code, e.g. upload_too_large")
    message: str = Field(description="one line for a person")


class ErrorResponse(BaseModel):
    error: ErrorBody


# What each error status means, for the OpenAPI schema's ``responses``.
ERROR_MEANINGS = {
    400: "a malformed request (its multipart body or Range header)",
    401: "no or invalid API key",
    404: "no such job or session (or not yours)",
    409: "the job is not done",
    413: "upload, image or video too large",
    415: "not a supported image or video type",
    416: "the Range is outside the result",
    422: "invalid input or option",
    429: "rate limited, or too many jobs or sessions; see Retry-After",
    503: "the server is busy; see Retry-After",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` entries of these error statuses, all with the error body.

    A route that declares 422 this way shows the service's error body for it rather
    than FastAPI's default validation error (the service answers both with its own).
    """
    return {
        status: {"model": ErrorResponse, "description": ERROR_MEANINGS[status]}
        for status in statuses
    }


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
