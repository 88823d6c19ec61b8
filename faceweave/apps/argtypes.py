"""argparse value types shared by the command line's sub-commands.

Each raises :class:`argparse.ArgumentTypeError` with a short reason, which
argparse turns into a usage error (exit code 2).
"""

from __future__ import annotations

import argparse
import math
import threading
from collections.abc import Sequence
from typing import Any

from faceweave.errors import UsageError


def number(text: str) -> float:
    """A float."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text}") from None


def whole_number(text: str) -> int:
    """An int."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text}") from None


def _from_zero_to(text: str, high: float) -> float:
    """A float in [0, ``high``]."""
    value = number(text)
    if not 0.0 <= value <= high:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be between 0 and {high:g}, got {text}")
    return value


def unit_interval(text: str) -> float:
    """A float in [0, 1]."""
    return _from_zero_to(text, 1.0)


def half_interval(text: str) -> float:
    """A float in [0, 0.5] (the face mask's feather)."""
    return _from_zero_to(text, 0.5)


def non_negative_float(text: str) -> float:
    """A float >= 0 (not NaN)."""
    value = number(text)
    if not value >= 0.0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0."""
    value = number(text)
    if not (value > 0.0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


# The highest frame rate taken: far past any camera or video (a frame rate goes into
# the encoder's time base, a fraction of integers, where 1e10 overflowed).
MAX_FPS = 1000.0


def frame_rate(text: str) -> float:
    """A frame rate: a float > 0, at most MAX_FPS."""
    value = positive_float(text)
    if value > MAX_FPS:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_FPS:g}, got {text}")
    return value


def seconds(text: str) -> float:
    """A duration: a float > 0, at most what a thread can wait (``threading.TIMEOUT_MAX``,
    about 292 years)."""
    value = positive_float(text)
    if value > threading.TIMEOUT_MAX:
        raise argparse.ArgumentTypeError(f"must be at most {threading.TIMEOUT_MAX:.0f}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An int >= 1."""
    value = whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An int >= 0."""
    value = whole_number(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


class OnceAction(argparse.Action):
    """An option that takes its value(s) once: given again, a usage error rather than
    the last one silently kept (``-s a.jpg -s b.jpg`` had swapped in b.jpg alone)."""

    def __init__(self, *args: Any, again: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.again = again

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        seen = f"_{self.dest}_given"
        if getattr(namespace, seen, False):
            names = "/".join(self.option_strings)
            parser.error(
                f"{names} is given more than once" + (f": {self.again}" if self.again else "")
            )
        setattr(namespace, seen, True)
        setattr(namespace, self.dest, values)


class _GivenOnce(argparse.Action):
    """A switch given once: twice (``--json --json``, ``--mask-lips --no-mask-lips``), a
    usage error, as every option (mixed in before argparse's own action)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        seen = f"_{self.dest}_given"
        if getattr(namespace, seen, False):
            parser.error(f"{'/'.join(self.option_strings)} is given more than once")
        setattr(namespace, seen, True)
        super().__call__(parser, namespace, values, option_string)


class OnceTrueAction(_GivenOnce, argparse._StoreTrueAction):
    """``store_true``, given once."""


class OnceFalseAction(_GivenOnce, argparse._StoreFalseAction):
    """``store_false``, given once."""


class OnceBooleanAction(_GivenOnce, argparse.BooleanOptionalAction):
    """``--x``/``--no-x``, given once between them."""


class SidesAction(OnceAction):
    """1, 2 or 4 values for the four sides, as in CSS (see
    :func:`~faceweave.processors.swap.css_sides`). Stores a 4-tuple; given twice, a
    usage error (as every one-value option)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from faceweave.processors.swap import css_sides

        try:
            sides = css_sides(values)
        except UsageError as error:
            parser.error(f"{option_string} {error}")
        super().__call__(parser, namespace, sides, option_string)
