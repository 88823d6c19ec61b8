"""Errors the service answers with, and how faceweave's own errors map to HTTP.

Every error a client sees has the body ``{"error": {"code": ..., "message": ...}}``
with a stable machine-readable ``code`` and a one-line human ``message``.
"""

from __future__ import annotations

import errno
import sqlite3
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
    "DISK_FULL_RETRY_S",
    "ENGINE_ERROR_MESSAGE",
    "ErrorBody",
    "ErrorResponse",
    "ServiceError",
    "disk_full",
    "error_responses",
    "http_status_of",
    "storage_full",
]

# What a client is told when the server's models fail (a model file that loads but
# fails or gives garbage when run): the detail, with the server's paths and the
# runtime's own words, goes to the server's log only.
ENGINE_ERROR_MESSAGE = (
    "the server's models (its swap engine or frame enhancer) failed on this request "
    "(see the server log)"
)

# How long a client is told to wait when the server's disk is full (Retry-After), and
# how long a worker waits before it takes a job again after one found it full.
DISK_FULL_RETRY_S = 60


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
    507: "the server's disk is full; see Retry-After",
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


def disk_full(error: BaseException | None) -> bool:
    """Whether ``error``, or an error it was raised from, says the disk (or a quota) is
    full: an ``OSError`` ENOSPC or EDQUOT, or SQLite's SQLITE_FULL. That is the
    server's condition, and it passes: no client's or job's fault."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(error, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
            return True
        error = error.__cause__ or error.__context__
    return False


def storage_full() -> ServiceError:
    """507 ``insufficient_storage``, with ``Retry-After``: the server's disk is full."""
    return ServiceError(
        507,
        "insufficient_storage",
        "the server's disk is full; try again later",
        headers={"Retry-After": str(DISK_FULL_RETRY_S)},
    )
