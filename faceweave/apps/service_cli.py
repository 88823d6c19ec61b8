"""``faceweave serve`` and ``faceweave keys``: run the service and manage its API keys.

Thin like the rest of :mod:`faceweave.apps`: parse arguments, build a
:class:`~faceweave.service.ServiceConfig`, call the service. Errors are
:class:`~faceweave.errors.FaceweaveError` subclasses, which ``faceweave``'s
``main`` turns into one line on stderr and an exit code (1 error, 2 usage).

Wiring (in :mod:`faceweave.apps.cli`)::

    from faceweave.apps.service_cli import add_service_commands
    add_service_commands(commands)   # after the other add_parser calls

Example:
    $ faceweave keys create --name alice --data ./faceweave-data
    $ faceweave serve --host 127.0.0.1 --port 8000 --data ./faceweave-data
    $ faceweave serve --engine inswapper --swapper-model inswapper_128.onnx \
          --embedder-model w600k_r50.onnx --enhancer-model gfpgan_1.4.onnx
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import logging
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from faceweave.analysis.onnx_backend import EXECUTION_PROVIDERS
from faceweave.apps.argtypes import (
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
)
from faceweave.apps.engine_args import (
    add_engine_options,
    add_frame_enhancer_options,
    engine_settings,
    frame_enhancer_blend,
)
from faceweave.errors import (
    EXIT_OK,
    EXIT_USAGE,
    FaceweaveError,
    InputError,
    OutputError,
    UsageError,
)
from faceweave.io.image import DEFAULT_MAX_PIXELS

__all__ = ["add_service_commands", "run_keys", "run_serve", "serve_main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_DATA = Path("faceweave-data")
MIB = 1024 * 1024


def add_service_commands(subparsers: Any) -> None:
    """Add ``serve`` and ``keys`` to the ``faceweave`` command's sub-parsers."""
    _add_serve_parser(subparsers)
    _add_keys_parser(subparsers)


def _add_serve_parser(subparsers: Any) -> argparse.ArgumentParser:
    serve: argparse.ArgumentParser = subparsers.add_parser(
        "serve",
        help="run the REST API and web page",
        description="Run the faceweave service: a REST API for swap jobs (OpenAPI at "
        "/docs) and a web page at /. Jobs are kept in SQLite and files under --data.",
    )
    # (a server logs as servers do: every line, with its tracebacks, to its log)
    serve.set_defaults(command=run_serve, own_logging=True)
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (%(default)s)")
    serve.add_argument("--port", type=_port, default=DEFAULT_PORT, help="(%(default)s)")
    _add_data_option(serve)
    serve.add_argument(
        "--workers",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="job worker threads, each with its own face analyser (the models of --engine "
        "and --enhancer-model load once, shared; default: half the CPU cores, 1..4); 0: this "
        "server only queues jobs, for another one on the same --data to run",
    )
    serve.add_argument(
        "--max-upload-mb",
        type=positive_float,
        default=200.0,
        metavar="MB",
        help="largest uploaded file (default %(default)s)",
    )
    serve.add_argument(
        "--max-pixels",
        type=positive_int,
        default=DEFAULT_MAX_PIXELS,
        metavar="N",
        help="largest image or video frame, width * height (default %(default)s)",
    )
    serve.add_argument(
        "--max-video-seconds",
        type=positive_float,
        default=120.0,
        metavar="S",
        help="longest video target (default %(default)s)",
    )
    serve.add_argument(
        "--retention-hours",
        type=non_negative_float,
        default=24.0,
        metavar="H",
        help="delete finished jobs' files after this long; 0 keeps them (default %(default)s)",
    )
    serve.add_argument(
        "--rate-limit",
        type=positive_float,
        default=10.0,
        metavar="PER_S",
        help="requests per second per key, sustained (default %(default)s)",
    )
    serve.add_argument(
        "--rate-burst",
        type=positive_int,
        default=100,
        metavar="N",
        help="requests per key at once (default %(default)s)",
    )
    serve.add_argument(
        "--max-active-jobs",
        type=positive_int,
        default=100,
        metavar="N",
        help="queued plus running jobs per key (default %(default)s)",
    )
    serve.add_argument("--no-preview", action="store_true", help="turn off POST /v1/preview")
    serve.add_argument(
        "--allow-unmarked",
        action="store_true",
        help="development only: start even if faceweave.provenance is missing",
    )
    serve.add_argument(
        "--execution-provider",
        choices=tuple(EXECUTION_PROVIDERS),
        default="cpu",
        help="onnxruntime provider of the models you bring (--engine inswapper, "
        "--enhancer-model, --occluder-model, --parser-model, --frame-enhancer-model; "
        "default cpu)",
    )
    add_engine_options(serve)
    add_frame_enhancer_options(
        serve, "every job's result, unless it asks upscale=false; not previews or live"
    )
    serve.add_argument(
        "--log-level",
        choices=("critical", "error", "warning", "info", "debug"),
        default="info",
    )
    return serve


def _add_keys_parser(subparsers: Any) -> None:
    keys = subparsers.add_parser(
        "keys",
        help="create, list or revoke API keys",
        description="Manage the service's API keys. A key is printed once, when created; "
        "only a peppered hash of it is stored.",
    )
    actions = keys.add_subparsers(title="actions", metavar="ACTION", required=True)
    create = actions.add_parser("create", help="create a key and print it (once)")
    create.set_defaults(command=run_keys, keys_action="create")
    create.add_argument("--name", required=True, help="who or what the key is for")
    _add_data_option(create)
    listing = actions.add_parser("list", help="list keys (ids and names, never the keys)")
    listing.set_defaults(command=run_keys, keys_action="list")
    _add_data_option(listing)
    revoke = actions.add_parser("revoke", help="revoke a key by its id")
    revoke.set_defaults(command=run_keys, keys_action="revoke")
    revoke.add_argument("key_id", metavar="ID", help="the key's id (see keys list)")
    _add_data_option(revoke)


def _add_data_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        metavar="DIR",
        help="database and job files (default ./%(default)s)",
    )


@contextlib.contextmanager
def _server_log(level: str) -> Iterator[None]:
    """faceweave's own log lines (jobs, live sessions, failures with their tracebacks)
    on stderr at ``level``, as uvicorn writes its own; without a handler they were
    lost below warnings, and warnings came out bare. A source photo's advice, every
    job's, is left to the job's notes."""
    from uvicorn.logging import DefaultFormatter

    logger = logging.getLogger("faceweave")
    advice = logging.getLogger("faceweave.advice")
    kept = logger.level, logger.propagate, advice.level
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(DefaultFormatter("%(levelprefix)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False  # (a root handler would write each line again)
    advice.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(kept[0])
        logger.propagate = kept[1]
        advice.setLevel(kept[2])


def run_serve(args: argparse.Namespace) -> int:
    """Run the service until interrupted (Ctrl-C or SIGTERM stop it cleanly)."""
    import uvicorn

    from faceweave.service import ServiceConfig, create_app
    from faceweave.service.auth import check_pepper
    from faceweave.service.config import default_workers

    engine = engine_settings(args)  # flags and model files, before anything is made
    config = ServiceConfig(
        data_dir=args.data,
        workers=default_workers() if args.workers is None else args.workers,
        max_upload_bytes=int(args.max_upload_mb * MIB),
        max_pixels=args.max_pixels,
        max_video_seconds=args.max_video_seconds,
        retention_hours=args.retention_hours,
        rate_per_s=args.rate_limit,
        rate_burst=args.rate_burst,
        max_active_jobs_per_key=args.max_active_jobs,
        preview_enabled=not args.no_preview,
        require_provenance=not args.allow_unmarked,
        engine=engine,
        frame_enhancer_model=args.frame_enhancer_model,
        frame_enhancer_blend=frame_enhancer_blend(args),
    ).validated()
    _check_data_dir(args.data)  # once the settings are known to be usable
    check_pepper(config.pepper_path, config.db_path)
    _check_address(args.host, args.port)
    from faceweave.processors.engines import SwapEngine

    # The models load now: an unusable file is one line, not a failed start-up.
    app = create_app(
        config,
        swap_engine=SwapEngine(config.engine),
        frame_enhancer=config.load_frame_enhancer(),
    )
    try:
        with _server_log(args.log_level):
            uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    except SystemExit as exc:  # uvicorn's own exit on a failed start (its code 3)
        if exc.code in (None, 0):
            return EXIT_OK
        raise OutputError(
            f"the service did not start on {args.host}:{args.port} (see the log above)"
        ) from None
    return EXIT_OK


def _check_address(host: str, port: int) -> None:
    """A clear error before the models load when the address cannot be listened on
    (taken by another server, or not this machine's)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: not an address to listen on ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            raise OutputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def run_keys(args: argparse.Namespace) -> int:
    """``keys create|list|revoke``; the key itself goes to stdout, notes to stderr."""
    from faceweave.service.auth import create_key, list_keys, load_pepper, revoke_key
    from faceweave.service.db import Database

    if args.data.is_file():
        raise InputError(
            f"{args.data}: --data names the folder holding the key store (faceweave.db), not a file"
        )
    if args.keys_action != "create" and not (args.data / "faceweave.db").is_file():
        # Listing or revoking makes no key store (a mistyped --data had made an empty one
        # and listed nothing).
        raise InputError(
            f"{args.data}: no key store here (faceweave keys create --data {args.data} makes one)"
        )
    if args.keys_action == "list":
        store = args.data / "faceweave.db"
        # Only read where this user may not write (another user's store, a read-only
        # mount); else opened as the server opens it, which tidies SQLite's files away.
        readable_only = not os.access(args.data, os.W_OK) or not os.access(store, os.W_OK)
        if readable_only:
            keys = list_keys(store)
        else:
            listing = Database(store)
            try:
                keys = list_keys(listing)
            finally:
                listing.close()
        for item in keys:
            created = _date(item.created_at)
            status = f"revoked {_date(item.revoked_at)}" if item.revoked_at else "active"
            print(f"{item.id}  {created}  {status:<28}  {item.name}")
        return EXIT_OK
    if args.keys_action == "create" and sys.stdout is None:
        # (its descriptor closed: the key would be printed nowhere, and stay active)
        raise OutputError("stdout is closed: a new key would be shown nowhere; none was made")
    _check_data_dir(args.data)
    db = Database(args.data / "faceweave.db")
    try:
        if args.keys_action == "create":
            record, key = create_key(db, load_pepper(args.data / "pepper.key", db), args.name)
            try:
                print(key, flush=True)
            except OSError as exc:
                # Nobody saw the key: it is not kept (it had been stored and listed).
                revoke_key(db, record.id)
                raise OutputError(
                    f"the new key could not be printed ({exc.strerror or exc}), so it was "
                    f"revoked: {record.id}"
                ) from exc
            print(
                f"created key {record.id} ({record.name}); it is shown only now, store it safely",
                file=sys.stderr,
            )
        elif args.keys_action == "revoke":
            if not revoke_key(db, args.key_id):
                raise InputError(f"no active key with id {args.key_id}")
            print(f"revoked key {args.key_id}", file=sys.stderr)
        else:  # pragma: no cover - argparse only sets the three actions
            raise UsageError(f"unknown keys action {args.keys_action}")
    finally:
        db.close()
    return EXIT_OK


def serve_main(argv: list[str] | None = None) -> int:
    """``python -m faceweave.service [serve options]``: the service without the full CLI."""
    from faceweave.runtime import tune_allocator

    tune_allocator()
    serve = _add_serve_parser(_Standalone())
    try:
        args = serve.parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return run_serve(args)
    except FaceweaveError as err:
        print(f"faceweave: error: {' '.join(str(err).split())}", file=sys.stderr)
        return err.exit_code


MODULE_PROG = "python -m faceweave.service"


class _ModuleParser(argparse.ArgumentParser):
    """``python -m faceweave.service``'s parser: a usage error is one line, as
    ``faceweave``'s are."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{MODULE_PROG}: error: {message} (see {MODULE_PROG} --help)\n")


class _Standalone:
    """Stands in for the ``faceweave`` command's sub-parsers: ``serve``'s options on a
    parser of their own."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.pop("help", None)
        return _ModuleParser(prog=MODULE_PROG, **kwargs)


def _check_data_dir(path: Path) -> None:
    """Create the data folder if needed and check it can be written, before anything
    starts (the service had failed in its startup with a traceback)."""
    from faceweave.io import make_output_dir

    make_output_dir(path)


def _date(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def _port(text: str) -> int:
    value = positive_int(text)
    if value > 65535:
        raise argparse.ArgumentTypeError(f"must be 1..65535, got {text}")
    return value
