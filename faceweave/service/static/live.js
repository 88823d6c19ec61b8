// faceweave live page: camera -> WebRTC -> server swap -> back. Plain JavaScript, no build step.
//
// Latency, two ways:
// * ping: the "stats" data channel echoes {type: "ping", t}; round trip = now - t.
// * frame round trip: each outgoing encoded frame's RTP timestamp is noted with the time it
//   left: in a worker (RTCRtpScriptTransform, live-worker.js) where the browser has it, so
//   no frame waits for the page's main thread; else with encoded insertable streams on
//   the main thread (older Chromium), which then must pipe the received frames too. The server sees it as pts = RTP timestamp minus the
//   first frame's, keeps that pts, and sends the swapped frame with RTP timestamp pts plus
//   its own random origin. The server reports each output frame's pts on the data channel,
//   with the RTP timestamp it leaves with (out_ts), so every frame shown
//   (requestVideoFrameCallback) is matched to the moment it was sent. A server that cannot
//   tell out_ts leaves the page to find the origin by pairing frames received with reports.
"use strict";

const KEY_STORAGE = "faceweave.apiKey";
const WINDOW = 100; // samples kept for the medians
const $ = (id) => document.getElementById(id);

const live = {
  session: null,
  pc: null,
  channel: null,
  stream: null,
  pingTimer: null,
  pings: [],
  frameRtts: [],
  serverMs: [],
  sentAt: new Map(), // RTP timestamp of an outgoing frame -> performance.now() when it left
  serverTs: [], // input RTP timestamps of the output frames, as the server reports them
  outToIn: new Map(), // output RTP timestamp -> input pts, when the server reports both
  remoteTs: [], // RTP timestamps of the first frames received (to find the offset)
  offset: null, // the server's RTP origin
  firstSent: null, // RTP timestamp of the first frame sent (pts 0 on the server)
  framesShown: 0,
  swapError: null, // why the server's last swap failed (the frame came back unswapped)
  dropped: 0,
  scriptTransform: typeof RTCRtpScriptTransform !== "undefined",
  insertable: typeof RTCRtpScriptTransform === "undefined"
    && typeof RTCRtpSender !== "undefined" && "createEncodedStreams" in RTCRtpSender.prototype,
  worker: null,
};
window.faceweaveLive = live; // for the end-to-end tests and the curious

function say(message, isError = false) {
  $("status").textContent = message;
  $("status").classList.toggle("error", isError);
}

function apiKey() {
  return $("api-key").value.trim();
}

async function api(path, options = {}) {
  const headers = Object.assign({ Authorization: `Bearer ${apiKey()}` }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body.error) message = `${body.error.message} (${body.error.code})`;
    } catch (_) { /* not JSON */ }
    throw new Error(message);
  }
  return response;
}

function push(list, value) {
  list.push(value);
  if (list.length > WINDOW) list.shift();
}

function quantile(values, q) {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo);
}

function showLatency() {
  const fmt = (values) => values.length
    ? `median ${quantile(values, 0.5).toFixed(0)} ms, p95 ${quantile(values, 0.95).toFixed(0)} ms`
    : "–";
  const frame = $("frame-rtt");
  if (live.frameRtts.length) {
    frame.textContent = fmt(live.frameRtts);
  } else if (live.pings.length && live.serverMs.length) {
    // No per-frame timestamps in this browser: network round trip plus server time.
    frame.textContent = `≈ ${(quantile(live.pings, 0.5) + quantile(live.serverMs, 0.5)).toFixed(0)} ms (estimate)`;
  }
  frame.dataset.median = quantile(live.frameRtts, 0.5);
  frame.dataset.p95 = quantile(live.frameRtts, 0.95);
  frame.dataset.samples = live.frameRtts.length;
  $("ping-rtt").textContent = fmt(live.pings);
  $("ping-rtt").dataset.median = quantile(live.pings, 0.5);
  $("server-ms").textContent = live.serverMs.length ? `median ${quantile(live.serverMs, 0.5).toFixed(0)} ms` : "–";
  $("frames").textContent = `${live.framesShown} shown, ${live.dropped} dropped by the server`;
}

function rtpOf(frame) {
  const meta = frame.getMetadata ? frame.getMetadata() : {};
  return meta.rtpTimestamp !== undefined ? meta.rtpTimestamp : frame.timestamp;
}

function passThrough(streams, onFrame) {
  const transform = new TransformStream({
    transform(frame, controller) {
      onFrame(frame);
      controller.enqueue(frame);
    },
  });
  streams.readable.pipeThrough(transform).pipeTo(streams.writable).catch(() => {});
}

function noteSent(rtp, at) {
  if (live.firstSent === null) live.firstSent = rtp;
  live.sentAt.set(rtp, at);
  if (live.sentAt.size > 300) live.sentAt.delete(live.sentAt.keys().next().value);
}

function findOffset() {
  // Some frames are never shown (the first ones, frames the compositor skips), so the i-th
  // frame shown is not always the i-th sent: every (shown, reported) pair votes for its
  // difference. Capture timestamps jitter, so only the true offset gathers many votes.
  if (live.remoteTs.length < 6 || live.serverTs.length < 6 || live.firstSent === null) return;
  const counts = new Map();
  for (const r of live.remoteTs) {
    for (const s of live.serverTs) {
      const d = (r - s) >>> 0;
      counts.set(d, (counts.get(d) || 0) + 1);
    }
  }
  const ranked = [...counts].sort((a, b) => b[1] - a[1]);
  const [offset, votes] = ranked[0];
  const runnerUp = ranked.length > 1 ? ranked[1][1] : 0;
  if (votes >= 4 && votes >= 2 * runnerUp) live.offset = offset;
}

function onRemoteFrame(now, metadata) {
  live.framesShown += 1;
  const rtp = metadata.rtpTimestamp;
  const reported = rtp === undefined ? undefined : live.outToIn.get(rtp >>> 0);
  if (reported !== undefined && live.firstSent !== null) {
    const sent = live.sentAt.get((reported + live.firstSent) >>> 0);
    if (sent !== undefined) push(live.frameRtts, now - sent);
  } else if (rtp !== undefined && live.outToIn.size === 0) {
    if (live.offset === null) {
      if (live.remoteTs.length < 20) live.remoteTs.push(rtp);
      findOffset();
    } else {
      const sent = live.sentAt.get((rtp - live.offset + live.firstSent) >>> 0);
      if (sent !== undefined) push(live.frameRtts, now - sent);
    }
  }
  const video = $("remote");
  if (live.pc) video.requestVideoFrameCallback(onRemoteFrame);
}

function onStats(event) {
  const message = JSON.parse(event.data);
  if (message.type === "pong") {
    push(live.pings, performance.now() - message.t);
  } else if (message.type === "frame") {
    push(live.serverMs, message.wait_ms + message.process_ms);
    // A swap that failed on the server (its model): the frame came back unswapped.
    if (message.error && message.error !== live.swapError) say(`Not swapped: ${message.error}`, true);
    else if (!message.error && live.swapError) say("Swapping again.");
    live.swapError = message.error || null;
    live.dropped = message.dropped;
    if (message.out_ts !== null && message.out_ts !== undefined) {
      live.outToIn.set(message.out_ts >>> 0, message.ts >>> 0);
      if (live.outToIn.size > 300) live.outToIn.delete(live.outToIn.keys().next().value);
    } else if (live.serverTs.length < 20) {
      live.serverTs.push(message.ts >>> 0);
    }
  }
}

function waitForIce(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => { if (pc.iceGatheringState === "complete") resolve(); };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, 2000); // host candidates are enough on a LAN
  });
}

async function sendSource() {
  // Up to three photos of the source person: "source", then "source_2", "source_3".
  const files = Array.from($("source").files).slice(0, 3);
  if (!files.length || !live.session) return;
  say(files.length > 1 ? `Analysing ${files.length} source photos…` : "Analysing the source face…");
  const url = `/v1/live/${live.session}/source`;
  let response;
  if (files.length === 1) {
    response = await api(url, {
      method: "POST", body: files[0],
      headers: { "Content-Type": files[0].type || "application/octet-stream" },
    });
  } else {
    const data = new FormData();
    files.forEach((file, i) => data.append(i === 0 ? "source" : `source_${i + 1}`, file));
    response = await api(url, { method: "POST", body: data });
  }
  // What the photos will show in the swap (several faces, turned, glasses...), under
  // the videos: above them a longer status would move them down, out of view.
  const notes = $("source-notes");
  notes.replaceChildren(...((await response.json()).notes || []).map((line) => {
    const item = document.createElement("li");
    item.textContent = line;
    return item;
  }));
  notes.hidden = notes.children.length === 0;
  say("Swapping live.");
}

async function sendFusion() {
  if (!live.session) return;
  await api(`/v1/live/${live.session}/fusion`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ fusion: Number($("fusion").value) }),
  });
}

function gaze() {
  return $("eye-contact").checked ? "source" : "target";
}

async function sendGaze() {
  if (!live.session) return;
  await api(`/v1/live/${live.session}/gaze`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ gaze: gaze() }),
  });
}

async function sendHands() {
  if (!live.session) return;
  await api(`/v1/live/${live.session}/hands`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ mask_hands: $("hands").checked }),
  });
}

async function start(event) {
  event.preventDefault();
  if (!apiKey()) { say("Enter your API key first.", true); return; }
  localStorage.setItem(KEY_STORAGE, apiKey());
  $("start").disabled = true;
  try {
    say("Opening the camera…");
    live.stream = await navigator.mediaDevices.getUserMedia({
      video: { width: 320, height: 240, frameRate: 15 }, audio: false,
    });
    $("local").srcObject = live.stream;
    const pc = new RTCPeerConnection(live.insertable ? { encodedInsertableStreams: true } : {});
    live.pc = pc;
    for (const track of live.stream.getVideoTracks()) {
      const sender = pc.addTrack(track, live.stream);
      if (live.scriptTransform) {
        live.worker = live.worker || new Worker("/static/live-worker.js");
        live.worker.onmessage = (e) => noteSent(e.data.rtp, e.data.at - performance.timeOrigin);
        sender.transform = new RTCRtpScriptTransform(live.worker, { side: "send" });
      } else if (live.insertable) {
        passThrough(sender.createEncodedStreams(), (frame) => noteSent(rtpOf(frame) >>> 0, performance.now()));
      }
    }
    pc.addEventListener("track", (e) => {
      if (live.insertable) passThrough(e.receiver.createEncodedStreams(), () => {});
      // Show frames as soon as they are decoded: no playout buffering for a live mirror.
      if ("jitterBufferTarget" in e.receiver) e.receiver.jitterBufferTarget = 0;
      else if ("playoutDelayHint" in e.receiver) e.receiver.playoutDelayHint = 0;
      const video = $("remote");
      video.srcObject = e.streams[0] || new MediaStream([e.track]);
      if ("requestVideoFrameCallback" in video) video.requestVideoFrameCallback(onRemoteFrame);
    });
    pc.addEventListener("connectionstatechange", () => {
      if (pc.connectionState === "failed") tearDown().then(() => say("The connection failed.", true));
    });
    live.channel = pc.createDataChannel("stats");
    live.channel.addEventListener("message", onStats);
    live.channel.addEventListener("open", () => {
      let id = 0;
      live.pingTimer = setInterval(() => {
        live.channel.send(JSON.stringify({ type: "ping", id: id++, t: performance.now() }));
        showLatency();
      }, 250);
    });
    await pc.setLocalDescription(await pc.createOffer());
    await waitForIce(pc);
    say("Connecting…");
    const answer = await (await api("/v1/live/offer", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        sdp: pc.localDescription.sdp, type: "offer", fusion: Number($("fusion").value), gaze: gaze(),
        mask_hands: $("hands").checked,
      }),
    })).json();
    live.session = answer.session;
    await pc.setRemoteDescription({ type: "answer", sdp: answer.sdp });
    $("stop").disabled = false;
  } catch (error) {
    await tearDown();
    say(error.message, true); // the reason stays on screen
    return;
  }
  if (!$("source").files.length) { say("Connected; choose a source face to swap."); return; }
  // A source photo the server refuses (no face in it) leaves the session running:
  // the camera comes back unchanged until another photo is chosen.
  try { await sendSource(); } catch (error) { say(`${error.message}; choose another photo.`, true); }
}

async function stop() {
  if (await tearDown()) say("Stopped.");
}

// Ends the session (the server's first, then the connection) and frees the camera;
// true when a session was open.
async function tearDown() {
  clearInterval(live.pingTimer);
  const session = live.session;
  live.session = null;
  if (session) {
    // keepalive: the request outlives the page when it is being closed (pagehide)
    try { await api(`/v1/live/${session}`, { method: "DELETE", keepalive: true }); } catch (_) { /* already gone */ }
  }
  if (live.pc) live.pc.close();
  live.pc = null;
  if (live.stream) for (const track of live.stream.getTracks()) track.stop();
  live.stream = null;
  $("local").srcObject = null;
  $("remote").srcObject = null;
  Object.assign(live, { offset: null, firstSent: null, remoteTs: [], serverTs: [] });
  live.outToIn.clear();
  live.sentAt.clear();
  $("start").disabled = false;
  $("stop").disabled = true;
  return Boolean(session);
}

// Eye contact is the embedded engine's: hidden when the server runs another.
async function showEngine() {
  const response = await fetch("/healthz");
  if (!response.ok) return;
  const health = await response.json();
  if (health.engine && health.engine !== "mesh") {
    document.querySelectorAll("[data-mesh-only]").forEach((element) => { element.hidden = true; });
    $("eye-contact").checked = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  showEngine().catch(() => { /* eye contact stays offered */ });
  $("api-key").value = localStorage.getItem(KEY_STORAGE) || "";
  $("live-form").addEventListener("submit", start);
  $("stop").addEventListener("click", stop);
  $("source").addEventListener("change", () => sendSource().catch((e) => say(e.message, true)));
  let fusionTimer = null;
  $("fusion").addEventListener("input", () => {
    $("fusion-value").textContent = Number($("fusion").value).toFixed(2);
    clearTimeout(fusionTimer); // at most one request per 100 ms while the slider moves
    fusionTimer = setTimeout(() => sendFusion().catch((e) => say(e.message, true)), 100);
  });
  $("eye-contact").addEventListener("change", () => sendGaze().catch((e) => say(e.message, true)));
  $("hands").addEventListener("change", () => sendHands().catch((e) => say(e.message, true)));
  window.addEventListener("pagehide", stop);
});
