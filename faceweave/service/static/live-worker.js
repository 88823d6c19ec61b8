// faceweave live page, worker side: notes when each encoded camera frame leaves, off the
// main thread (RTCRtpScriptTransform). Times are absolute (timeOrigin + now) because a
// worker's clock starts at its own origin; the page converts them back to its own.
"use strict";

onrtctransform = (event) => {
  const { readable, writable } = event.transformer;
  readable
    .pipeThrough(new TransformStream({
      transform(frame, controller) {
        const meta = frame.getMetadata ? frame.getMetadata() : {};
        const rtp = meta.rtpTimestamp !== undefined ? meta.rtpTimestamp : frame.timestamp;
        postMessage({ rtp: rtp >>> 0, at: performance.timeOrigin + performance.now() });
        controller.enqueue(frame);
      },
    }))
    .pipeTo(writable)
    .catch(() => {});
};
