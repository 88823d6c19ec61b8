"""dlib's identity descriptor in a child process, so that a live session need not wait.

dlib's descriptor network takes about a hundred milliseconds a face on two cores
and holds Python's lock all the while: run in a live session's own process it
stalled every thread of the session (capture, analysis, swap, output) for three
or four frames at each identity check. :class:`IdentityWorker` cuts the aligned
150 px face chip in the caller's process (a fraction of a millisecond) and sends
it to a child Python process that runs the network; the descriptor comes back a
few frames later, the same to the last bit as :meth:`DlibIdentity.embed`'s.

The child is a plain ``python -m faceweave.analysis.identity_worker`` (not
:mod:`multiprocessing`, whose spawned children import the parent's main script
again: a user's script without a ``__main__`` guard would start itself anew). It
speaks over its standard input and output: the parent writes one request (an id
and a chip's bytes) at a time, and reads the answers on a thread of its own, so
that it never blocks on the pipe. The child ends when its input closes, so it does
not outlive its parent, and it stays out of the terminal's Ctrl-C (a session of
its own, and SIGINT ignored).

Example:
    >>> worker = IdentityWorker.start(analyser.identity)  # doctest: +SKIP
    >>> worker.submit(7, face)  # doctest: +SKIP
    >>> worker.results()  # a few frames later: [(7, descriptor)]  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import numpy as np
from numpy.typing import NDArray

from faceweave.analysis.dlib_backend import CHIP_SIZE, DlibIdentity, dlib_alignment
from faceweave.types import Face

_HEADER = struct.Struct("<Q")  # a request's or an answer's id
_CHIP_BYTES = CHIP_SIZE * CHIP_SIZE * 3
_DESCRIPTOR_BYTES = 128 * 4  # float32
_READY = b"faceweave-identity ready\n"
# Seconds to wait for the child to end when closing, before it is killed.
_CLOSE_WAIT = 2.0
# embed()'s key for its own request, and how long it waits for the reader at a time.
_OWN_KEY = -1
_ANSWER_WAIT = 1.0
# Seconds the child may take to load dlib's network (about half a second here) before
# it is taken for stuck and the caller checks identities itself.
_READY_WAIT = 30.0


class IdentityWorker:
    """dlib descriptors computed by a child process, one face at a time.

    Use :meth:`start` (None where no child can be started: the caller then computes
    descriptors itself). :meth:`submit` a face when :attr:`idle`; collect
    :meth:`results` on later frames; :meth:`close` at the end.

    Attributes:
        alive: the child runs (False once it ended or failed: compute in-process).
    """

    def __init__(self, identity: DlibIdentity, process: subprocess.Popen[bytes]) -> None:
        self._identity = identity
        self._process = process
        assert process.stdin is not None and process.stdout is not None
        self._stdin: IO[bytes] = process.stdin
        self._answers: queue.Queue[tuple[int, NDArray[np.float32]] | None] = queue.Queue()
        self._ready = threading.Event()
        self._keys: dict[int, int] = {}
        self._next_id = 0
        self._pending: int | None = None
        self._done: list[tuple[int, NDArray[np.float32]]] = []
        self._started = time.monotonic()
        self.alive = True
        self._reader = threading.Thread(
            target=self._read, args=(process.stdout,), name="identity-reader", daemon=True
        )
        self._reader.start()

    @classmethod
    def start(cls, identity: DlibIdentity) -> IdentityWorker | None:
        """A worker whose child loads dlib's network with ``identity``'s settings (about
        half a second, while the caller goes on); None if no child process can start
        (or this is a frozen app, whose executable is no Python)."""
        if getattr(sys, "frozen", False) or not sys.executable:
            return None
        command = [sys.executable, "-m", __name__, str(identity.jitter)]
        # The child imports this same faceweave: a source checkout's folder goes on its
        # path (an installed one's site-packages does not: ahead of the standard library
        # there, a package could shadow a module of it).
        root = Path(__file__).resolve().parents[2]
        paths = list(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
        if root.name not in ("site-packages", "dist-packages"):
            paths.insert(0, str(root))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        if paths:
            env["PYTHONPATH"] = os.pathsep.join(paths)
        try:
            process = subprocess.Popen(  # noqa: S603 - our own module, no shell
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
                start_new_session=os.name == "posix",
                creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0),
            )
        except OSError:
            return None
        return cls(identity, process)

    @property
    def idle(self) -> bool:
        """The child has loaded its network and has no face in hand."""
        self._drain()
        if self.alive and not self._ready.is_set():
            if time.monotonic() - self._started < _READY_WAIT:
                return False
            self._end()  # stuck loading: the caller checks identities itself
            self._process.kill()
        return self.alive and self._pending is None

    def submit(self, key: int, face: Face) -> bool:
        """Send ``face``'s chip for its descriptor, answered under ``key`` by
        :meth:`results`; False (nothing sent) unless :attr:`idle`, or for a face
        without its frame."""
        if face.frame is None or not self.idle:
            return False
        box, points = dlib_alignment(face.landmarks_478)
        chip = self._identity.chip(face.frame, box, points)
        request_id = self._next_id
        self._next_id += 1
        try:
            self._stdin.write(_HEADER.pack(request_id) + chip.tobytes())
            self._stdin.flush()
        except (OSError, ValueError):
            self._end()
            return False
        self._keys[request_id] = key
        self._pending = request_id
        return True

    def embed(self, face: Face) -> NDArray[np.float32] | None:
        """``face``'s descriptor, waiting for it (without Python's lock: the caller's
        other threads go on meanwhile); None when the child cannot answer (it ended,
        never loaded, or has another face in hand): compute it in-process then."""
        self._ready.wait(max(0.0, _READY_WAIT - (time.monotonic() - self._started)))
        request = self._next_id
        if not self.submit(_OWN_KEY, face):
            return None
        while self.alive:
            for i, (key, descriptor) in enumerate(self._done):
                if key == _OWN_KEY:
                    del self._done[i]
                    return descriptor
            if self._pending != request:  # answered, but not as asked: give up
                return None
            self._drain(wait=_ANSWER_WAIT)
        return None

    def results(self) -> list[tuple[int, NDArray[np.float32]]]:
        """The descriptors answered since the last call, with their keys."""
        self._drain()
        done, self._done = self._done, []
        return done

    def close(self) -> None:
        """End the child (its input closed; killed if it does not end soon)."""
        self.alive = False
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        try:
            self._process.wait(_CLOSE_WAIT)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(_CLOSE_WAIT)
        if not self._reader.is_alive():  # else it is still reading: it ends at the EOF
            assert self._process.stdout is not None
            self._process.stdout.close()

    def __enter__(self) -> IdentityWorker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drain(self, wait: float = 0.0) -> None:
        """Take the reader's answers into ``_done`` (kept for :meth:`results`), waiting
        up to ``wait`` seconds for the first."""
        while True:
            try:
                answer = self._answers.get(timeout=wait) if wait > 0 else self._answers.get_nowait()
            except queue.Empty:
                return
            wait = 0.0
            if answer is None:  # the child ended
                self._end()
                continue
            request_id, descriptor = answer
            if request_id == self._pending:
                self._pending = None
            key = self._keys.pop(request_id, None)
            if key is not None:
                self._done.append((key, descriptor))

    def _end(self) -> None:
        self.alive = False
        self._pending = None

    def _read(self, stdout: IO[bytes]) -> None:
        """The reader thread: the ready line, then (id, descriptor) answers."""
        try:
            if stdout.readline() != _READY:
                return
            self._ready.set()
            while True:
                head = stdout.read(_HEADER.size)
                body = stdout.read(_DESCRIPTOR_BYTES)
                if len(head) < _HEADER.size or len(body) < _DESCRIPTOR_BYTES:
                    return
                (request_id,) = _HEADER.unpack(head)
                self._answers.put((request_id, np.frombuffer(body, np.float32).copy()))
        except (OSError, ValueError):
            return
        finally:
            self._answers.put(None)


def _serve(jitter: int, requests: IO[bytes], answers: IO[bytes]) -> None:
    """The child: descriptors of the chips read from ``requests``, until it closes."""
    identity = DlibIdentity(jitter=jitter)
    answers.write(_READY)
    answers.flush()
    while True:
        head = requests.read(_HEADER.size)
        body = requests.read(_CHIP_BYTES)
        if len(head) < _HEADER.size or len(body) < _CHIP_BYTES:
            return
        chip = np.frombuffer(body, np.uint8).reshape(CHIP_SIZE, CHIP_SIZE, 3)
        descriptor = identity.embed_chip(chip).astype(np.float32)
        answers.write(head + descriptor.tobytes())
        answers.flush()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when this ends
    # The answers get the standard output's pipe to themselves: anything a library
    # prints goes where the standard error goes (nowhere, as the parent starts it).
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    try:
        _serve(int(args[0]) if args else 0, sys.stdin.buffer, answers)
    except (OSError, ValueError):  # the parent went away mid-answer
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
