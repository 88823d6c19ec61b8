"""Error hierarchy.

Every error faceweave raises on purpose derives from :class:`FaceweaveError`
and from the closest Python built-in, so callers may catch either
``faceweave.errors.NoFaceError`` or plain ``ValueError``. Each class carries
the process exit code the CLI uses for it (documented in the README).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NO_FACE = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it


class FaceweaveError(Exception):
    """Base class of all faceweave errors."""

    exit_code: int = EXIT_ERROR


class InputError(FaceweaveError, ValueError):
    """An input file or argument cannot be used (missing, unreadable, unsupported)."""


class UnsupportedFormatError(InputError):
    """The file's content is not a format faceweave reads or writes."""


class ImageTooLargeError(InputError):
    """The image has more pixels than the configured limit."""


class NoFaceError(FaceweaveError, ValueError):
    """No face was found where one is needed (source or target)."""

    exit_code = EXIT_NO_FACE


class OutputError(FaceweaveError, OSError):
    """The output cannot be written."""


class UsageError(FaceweaveError, ValueError):
    """Arguments that do not fit together."""

    exit_code = EXIT_USAGE


class UnknownOptionError(UsageError, TypeError):
    """A keyword that is no option: a TypeError, as Python's own for an unexpected
    keyword argument, and a UsageError (exit code 2) that lists the options."""


class BackendError(FaceweaveError, RuntimeError):
    """A model backend failed to load or to run."""
