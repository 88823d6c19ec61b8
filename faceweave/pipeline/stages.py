"""Frames in, frames out: stages on threads joined by bounded queues.

::

    source --q--> stage 1 --q--> ... --q--> stage n --q--> sink (caller's thread)

* ``mode="ordered"`` (files): every packet goes through, in order; a full queue
  blocks its producer (back-pressure), so memory stays bounded.
* ``mode="latest"`` (live input): a full queue drops its *oldest* packet to make
  room, so a slow stage never lets latency creep up; drops are counted per queue.
* Shutdown: a sentinel follows the last packet through every queue; :meth:`Pipeline.stop`
  sets an Event that every blocking call polls. The first exception in any
  thread stops the pipeline and is re-raised by :meth:`Pipeline.run`.
* The sink runs in the thread that called :meth:`Pipeline.run` (GUI toolkits
  want their windows there), so Ctrl-C stops the pipeline and propagates.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from time import perf_counter
from typing import Any, Literal

import numpy as np

from faceweave.errors import UsageError
from faceweave.types import Frame

_SENTINEL = object()  # end of input; follows the last packet through every queue
_POLL_S = 0.05  # how often blocked threads look at the stop Event


@dataclass
class Packet:
    """One frame on its way through the pipeline.

    Attributes:
        index: position in the input, from 0.
        pts: presentation timestamp in the container's time base, None for live input.
        time: media time in seconds.
        image: the frame, (H, W, 3) uint8 BGR; stages may replace it.
        captured_at: ``time.perf_counter()`` when the frame entered the pipeline.
        data: per-stage results, e.g. ``data["faces"]``.
        timings: milliseconds spent in each stage for this packet.
    """

    index: int
    pts: int | None
    time: float
    image: Frame
    captured_at: float = field(default_factory=perf_counter)
    data: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class Stage:
    """A named step run on its own thread; ``process`` returns None to drop the packet."""

    name: str
    process: Callable[[Packet], Packet | None]


@dataclass(frozen=True)
class Timing:
    """Distribution of durations in milliseconds (NaN when count is 0)."""

    count: int
    mean: float
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values_ms: list[float]) -> Timing:
        if not values_ms:
            return cls(0, float("nan"), float("nan"), float("nan"), float("nan"))
        p50, p95, p99 = np.percentile(values_ms, [50, 95, 99])
        return cls(len(values_ms), float(np.mean(values_ms)), float(p50), float(p95), float(p99))


@dataclass(frozen=True)
class PipelineStats:
    """What a run did.

    Attributes:
        frames_in: packets read from the source.
        frames_out: packets handed to the sink.
        dropped: packets dropped by a full queue (latest mode), by the stage it fed.
        discarded: packets a stage chose to drop (returned None), by stage.
        stage_ms: time per packet spent in ``source`` (reading), each stage and ``sink``.
        latency_ms: from ``captured_at`` to the sink receiving the packet.
        wall_s: duration of :meth:`Pipeline.run`.
        fps: frames_out / wall_s.
        completed: the end of input reached the sink (not stopped, no error).
    """

    frames_in: int
    frames_out: int
    dropped: dict[str, int]
    discarded: dict[str, int]
    stage_ms: dict[str, Timing]
    latency_ms: Timing
    wall_s: float
    fps: float
    completed: bool


class Pipeline:
    """Runs ``source -> stages -> sink`` with one thread per stage.

    Args:
        source: an iterable of packets, or a callable returning the next packet
            and None at the end (a camera's ``read``).
        stages: processing steps, in order; names must be unique.
        sink: receives every packet that comes out, in the caller's thread.
        queue_size: capacity of each queue between threads.
        mode: ``"ordered"`` (files: nothing dropped) or ``"latest"`` (live: stale frames dropped).
        join_timeout: seconds to wait for each thread when shutting down.

    Example:
        >>> pipeline = Pipeline(packets, [Stage("swap", swap_packet)], writer.write)
        >>> stats = pipeline.run()  # doctest: +SKIP
    """

    def __init__(
        self,
        source: Iterable[Packet] | Callable[[], Packet | None],
        stages: list[Stage],
        sink: Callable[[Packet], None],
        *,
        queue_size: int = 4,
        mode: Literal["ordered", "latest"] = "ordered",
        join_timeout: float = 5.0,
    ) -> None:
        if mode not in ("ordered", "latest"):
            raise UsageError(f"mode must be 'ordered' or 'latest', got {mode!r}")
        if queue_size < 1:
            raise UsageError("queue_size must be >= 1")
        names = [s.name for s in stages]
        if len(set(names)) != len(names) or {"source", "sink"} & set(names):
            raise UsageError(f"stage names must be unique and not source/sink: {names}")
        self.source, self.stages, self.sink = source, stages, sink
        self.mode, self.join_timeout = mode, join_timeout
        self._queues: list[queue.Queue[Any]] = [
            queue.Queue(maxsize=queue_size) for _ in range(len(stages) + 1)
        ]
        self._consumers = [*names, "sink"]  # who reads each queue
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._dropped = dict.fromkeys(self._consumers, 0)
        self._discarded = dict.fromkeys(names, 0)
        self._ms: dict[str, list[float]] = {name: [] for name in ["source", *self._consumers]}
        self._frames_in = 0
        self._started = False
        self._threads: list[threading.Thread] = []

    def stages_running(self) -> bool:
        """Whether a stage's thread still works after :meth:`run` returned (one its join
        gave up on): what that stage uses is not the caller's to free yet."""
        return any(thread.is_alive() for thread in self._threads[1:])

    def stop(self) -> None:
        """Ask every thread to end; safe from any thread, returns at once."""
        self._stop.set()

    def run(self) -> PipelineStats:
        """Run to the end of the source, :meth:`stop` or the first error; returns the stats.

        A pipeline runs once. KeyboardInterrupt and the first error of any thread
        are re-raised here, after every thread was stopped and joined.
        """
        if self._started:
            raise UsageError("a Pipeline runs once; build a new one")
        self._started = True
        start = perf_counter()
        # Daemon threads: a source still blocked in a read after the join's timeout (a
        # stalled camera stream) must not keep the process from exiting.
        threads = [
            threading.Thread(target=self._guard(self._read), name="faceweave-source", daemon=True)
        ]
        for i, stage in enumerate(self.stages):
            work = self._guard(functools.partial(self._work, i, stage))
            threads.append(
                threading.Thread(target=work, name=f"faceweave-{stage.name}", daemon=True)
            )
        self._threads = threads
        latencies: list[float] = []
        completed = False
        try:
            for thread in threads:
                thread.start()
            while (item := self._get(self._queues[-1])) is not None:
                if item is _SENTINEL:
                    completed = True
                    break
                latencies.append((perf_counter() - item.captured_at) * 1e3)
                t0 = perf_counter()
                self.sink(item)
                self._ms["sink"].append((perf_counter() - t0) * 1e3)
        finally:  # also on Ctrl-C or a sink error: stop and join the threads, then propagate
            self.stop()
            for thread in threads:
                if thread.is_alive():
                    thread.join(self.join_timeout)
        if self._error is not None:
            raise self._error
        wall = perf_counter() - start
        return PipelineStats(
            frames_in=self._frames_in,
            frames_out=len(latencies),
            dropped=dict(self._dropped),
            discarded=dict(self._discarded),
            stage_ms={name: Timing.of(ms) for name, ms in self._ms.items()},
            latency_ms=Timing.of(latencies),
            wall_s=wall,
            fps=len(latencies) / wall if wall > 0 else 0.0,
            completed=completed,
        )

    # -- threads ---------------------------------------------------------------------------

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as exc:  # any error ends the whole pipeline
                with self._lock:
                    if self._error is None:
                        self._error = exc
                self.stop()

        return run

    def _read(self) -> None:
        source = self.source
        packets: Iterator[Packet] = (
            iter(source) if isinstance(source, Iterable) else iter(source, None)  # type: ignore[arg-type]
        )
        try:
            while not self._stop.is_set():
                t0 = perf_counter()
                packet = next(packets, None)
                if packet is None:
                    self._put(0, _SENTINEL)
                    return
                self._ms["source"].append((perf_counter() - t0) * 1e3)
                packet.timings["source"] = self._ms["source"][-1]
                self._frames_in += 1
                self._put(0, packet)
        finally:
            close = getattr(packets, "close", None)  # release a generator's file or camera
            if close is not None:
                close()

    def _work(self, i: int, stage: Stage) -> None:
        while (item := self._get(self._queues[i])) is not None:
            if item is _SENTINEL:
                self._put(i + 1, _SENTINEL)
                return
            t0 = perf_counter()
            out = stage.process(item)
            ms = (perf_counter() - t0) * 1e3
            self._ms[stage.name].append(ms)
            if out is None:
                self._discarded[stage.name] += 1
                continue
            out.timings[stage.name] = ms
            self._put(i + 1, out)

    def _get(self, q: queue.Queue[Any]) -> Any:
        """The next item, or None once the pipeline is stopped."""
        while not self._stop.is_set():
            try:
                return q.get(timeout=_POLL_S)
            except queue.Empty:
                continue
        return None

    def _put(self, i: int, item: Any) -> bool:
        """Queue an item; False when the pipeline stopped first."""
        q = self._queues[i]
        while not self._stop.is_set():
            if self.mode == "latest" and item is not _SENTINEL:
                try:
                    q.put_nowait(item)
                    return True
                except queue.Full:
                    try:  # one producer per queue: after this get there is room
                        q.get_nowait()
                        self._dropped[self._consumers[i]] += 1
                    except queue.Empty:
                        pass
                    continue
            try:
                q.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False


def packets_from_frames(frames: Iterable[Frame], *, fps: float) -> Iterator[Packet]:
    """Wrap plain frames as packets at a fixed frame rate (pts counts frames)."""
    for index, frame in enumerate(frames):
        yield Packet(index=index, pts=index, time=index / fps, image=frame)
