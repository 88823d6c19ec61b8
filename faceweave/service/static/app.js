// faceweave web page: plain JavaScript, no build step. Talks to the same REST API as curl.
"use strict";

const KEY_STORAGE = "faceweave.apiKey";
const POLL_MS = 1000;
const $ = (id) => document.getElementById(id);

let currentJob = null;
let pollTimer = null;

function apiKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

function say(message, isError = false) {
  const status = $("status");
  status.textContent = message;
  status.classList.toggle("error", isError);
}

async function api(path, options = {}) {
  const key = apiKey();
  if (!key) throw new Error("Enter your API key first.");
  const headers = Object.assign({ Authorization: `Bearer ${key}` }, options.headers || {});
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      if (body.error) message = `${body.error.message} (${body.error.code})`;
    } catch (_) { /* not JSON */ }
    if (response.status === 429) {
      const wait = response.headers.get("Retry-After");
      if (wait) message += `; retry in ${wait} s`;
    }
    const error = new Error(message);
    error.status = response.status;
    throw error;
  }
  return response;
}

// The server's video containers: a browser may give a video no type (.mkv, .mov).
const VIDEO_FILE = /\.(mp4|mov|mkv|webm)$/i;

function isVideo(file) {
  return file.type.startsWith("video/") || (!file.type && VIDEO_FILE.test(file.name));
}

// An animated GIF or PNG (and a WebP, which may be one) is swapped as a video is: the
// trim applies (a still WebP with a trim is refused by the server, saying why).
const ANIMATED_TYPE = /^image\/(gif|apng|webp)$/;
const ANIMATED_FILE = /\.(gif|apng|webp)$/i;

function isMoving(file) {
  return isVideo(file) || ANIMATED_TYPE.test(file.type) || (!file.type && ANIMATED_FILE.test(file.name));
}

function formData() {
  const form = $("swap-form");
  const data = new FormData();
  // Up to three photos of the source person: "source", then "source_2", "source_3".
  const sources = Array.from(form.elements.source.files).slice(0, 3);
  sources.forEach((file, i) => data.append(i === 0 ? "source" : `source_${i + 1}`, file));
  for (const name of ["target", "reference"]) {
    const input = form.elements[name];
    if (input.files.length && !(name === "reference" && form.elements.face_selector.value !== "reference")) {
      data.append(name, input.files[0]);
    }
  }
  // A server on another engine refuses the mesh engine's options: those are hidden, and not sent.
  const shown = (name) => !form.elements[name].closest("[hidden]");
  for (const name of ["fusion", "light", "shape", "creases", "color", "blend", "gaze", "face_selector"]) {
    if (shown(name)) data.append(name, form.elements[name].value);
  }
  for (const name of ["mask_mouth", "mask_lips", "mask_eyes", "mask_glasses", "mask_hands", "upscale"]) {
    if (shown(name)) data.append(name, form.elements[name].checked ? "true" : "false");
  }
  // The video options go only where they apply: an image job refuses them when set.
  const target = form.elements.target.files[0];
  if (target && isVideo(target)) {
    data.append("keep_audio", form.elements.keep_audio.checked ? "true" : "false");
  }
  if (target && isMoving(target)) {
    for (const name of ["trim_start", "trim_end"]) {
      if (form.elements[name].value !== "") data.append(name, form.elements[name].value);
    }
  }
  return data;
}

function showThumb(input, img) {
  const file = input.files[0];
  if (img.src) URL.revokeObjectURL(img.src);
  if (file && file.type.startsWith("image/")) {
    // A format the browser does not draw (TIFF outside Safari) gets no thumbnail.
    img.onerror = () => { img.hidden = true; };
    img.src = URL.createObjectURL(file);
    img.alt = `Selected ${input.id}: ${file.name}`;
    img.hidden = false;
  } else {
    img.hidden = true;
  }
}

async function preview() {
  if (!$("swap-form").reportValidity()) return;
  say("Computing a preview…");
  try {
    const response = await api("/v1/preview", { method: "POST", body: formData() });
    const blob = await response.blob();
    const img = $("preview");
    if (img.src) URL.revokeObjectURL(img.src);
    img.src = URL.createObjectURL(blob);
    $("preview-box").hidden = false;
    say("Preview ready.");
  } catch (error) {
    say(error.message, true);
  }
}

async function submitJob(event) {
  event.preventDefault();
  say("Uploading…");
  $("submit-button").disabled = true;
  try {
    const response = await api("/v1/jobs", { method: "POST", body: formData() });
    const job = await response.json();
    say(`Job ${job.id} queued.`);
    watch(job.id);
    refreshJobs();
  } catch (error) {
    say(error.message, true);
  } finally {
    $("submit-button").disabled = false;
  }
}

function watch(jobId) {
  currentJob = jobId;
  clearTimeout(pollTimer);
  $("current-box").hidden = false;
  $("result-box").hidden = true;
  poll();
}

async function poll() {
  if (!currentJob) return;
  const jobId = currentJob;
  try {
    const job = await (await api(`/v1/jobs/${jobId}`)).json();
    if (jobId !== currentJob) return;
    $("current-progress").value = job.progress;
    // (A failed or cancelled job's progress says only where it stopped.)
    const moving = job.state === "queued" || job.state === "running";
    let text = `Job ${job.id}: ${job.state}` + (moving ? ` (${Math.round(job.progress * 100)} %)` : "");
    if (job.error) text += ` — ${job.error.message}`;
    $("current-state").textContent = text;
    if (job.state === "done") {
      await showResult(job);
      refreshJobs();
    } else if (job.state === "queued" || job.state === "running") {
      pollTimer = setTimeout(poll, POLL_MS);
    } else {
      refreshJobs();
    }
  } catch (error) {
    if (jobId !== currentJob) return;
    $("current-state").textContent = error.message;
    // A lost connection or a rate limit passes: keep watching (not a job that is gone).
    if (error.status !== 404 && error.status !== 401) pollTimer = setTimeout(poll, 3 * POLL_MS);
  }
}

async function showResult(job) {
  // The result needs the Authorization header, so it is fetched and shown as a blob URL.
  const blob = await (await api(job.result.url)).blob();
  const url = URL.createObjectURL(blob);
  const isVideo = job.result.media_type.startsWith("video/");
  $("result-image").hidden = isVideo;
  $("result-video").hidden = !isVideo;
  if (isVideo) $("result-video").src = url; else $("result-image").src = url;
  const link = $("result-link");
  link.href = url;
  link.download = `faceweave-${job.id}${extensionOf(job.result.media_type)}`;
  // What the source photo shows in the result (a turned head, glasses, closed eyes).
  const notes = $("result-notes");
  notes.replaceChildren(...(job.notes || []).map((line) => {
    const item = document.createElement("li");
    item.textContent = line;
    return item;
  }));
  notes.hidden = notes.children.length === 0;
  $("result-box").hidden = false;
}

function extensionOf(mediaType) {
  return { "image/png": ".png", "image/jpeg": ".jpg", "image/webp": ".webp", "video/mp4": ".mp4",
    "video/quicktime": ".mov", "video/x-matroska": ".mkv", "video/webm": ".webm", "image/gif": ".gif",
    "image/apng": ".apng" }[mediaType] || "";
}

async function refreshJobs() {
  const body = $("jobs");
  if (!apiKey()) { body.replaceChildren(); return; }
  try {
    const { jobs } = await (await api("/v1/jobs?limit=50")).json();
    body.replaceChildren(...jobs.map(jobRow));
  } catch (error) {
    say(error.message, true);
  }
}

function jobRow(job) {
  const row = document.createElement("tr");
  const cells = [new Date(job.created_at).toLocaleString(), job.inputs.target ? job.inputs.target.name : "",
    job.error ? `${job.state}: ${job.error.message}` : `${job.state} ${Math.round(job.progress * 100)} %`];
  for (const text of cells) {
    const cell = document.createElement("td");
    cell.textContent = text;
    row.append(cell);
  }
  const actions = document.createElement("td");
  const show = document.createElement("button");
  show.type = "button";
  show.textContent = "Show";
  show.setAttribute("aria-label", `Show job ${job.id}`);
  show.addEventListener("click", () => watch(job.id));
  const remove = document.createElement("button");
  remove.type = "button";
  remove.textContent = job.state === "queued" || job.state === "running" ? "Cancel" : "Delete";
  remove.setAttribute("aria-label", `${remove.textContent} job ${job.id}`);
  remove.addEventListener("click", async () => {
    try {
      await api(`/v1/jobs/${job.id}`, { method: "DELETE" });
      if (currentJob === job.id) { currentJob = null; $("current-box").hidden = true; }
      refreshJobs();
    } catch (error) {
      say(error.message, true);
    }
  });
  actions.append(show, " ", remove);
  row.append(actions);
  return row;
}

// The server's engine (no key needed): another than the embedded one takes fewer options;
// the models it runs (an enhancer, an occluder, a face parser) are named in a note, and
// a frame enhancer's upscaling is a choice of each job.
async function showEngine() {
  const response = await fetch("/healthz");
  if (!response.ok) return;
  const health = await response.json();
  if (health.frame_enhancer_scale) {
    $("upscale-scale").textContent = `x${health.frame_enhancer_scale}`;
    $("upscale-box").hidden = false;
  }
  const extras = [
    health.enhancer ? "a face enhancer restores the faces" : "",
    health.occluder ? "a face occluder keeps what covers them" : "",
    health.parser
      ? `a face parser swaps only their ${(health.mask_regions || []).join(", ")}`
      : "",
    health.mask_areas && health.mask_areas.length
      ? `only their ${health.mask_areas.join(", ")} are swapped`
      : "",
  ].filter(Boolean);
  const mesh = !health.engine || health.engine === "mesh";
  if (mesh && !extras.length) return;
  if (!mesh) {
    // Options are removed (Safari shows a hidden <option>), the other controls hidden.
    document.querySelectorAll("[data-mesh-only]").forEach((element) => {
      if (element.tagName === "OPTION") element.remove();
      else element.hidden = true;
    });
    if (!$("color").value) $("color").value = "lct";
  }
  const note = $("engine-note");
  note.textContent = `This server swaps with the ${health.engine} engine` +
    (extras.length ? `, and ${extras.join(" and ")}.` : ".");
  note.hidden = false;
}

document.addEventListener("DOMContentLoaded", () => {
  showEngine().catch(() => { /* the page works with every option shown */ });
  $("api-key").value = apiKey();
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    localStorage.setItem(KEY_STORAGE, $("api-key").value.trim());
    say("Key saved in this browser.");
    refreshJobs();
  });
  $("forget-key").addEventListener("click", () => {
    localStorage.removeItem(KEY_STORAGE);
    $("api-key").value = "";
    $("jobs").replaceChildren();
    say("Key forgotten.");
  });
  for (const name of ["fusion", "light", "shape", "creases"]) {
    $(name).addEventListener("input", () => {
      $(`${name}-value`).textContent = Number($(name).value).toFixed(2);
    });
  }
  $("face_selector").addEventListener("change", () => {
    const needsReference = $("face_selector").value === "reference";
    $("reference-box").hidden = !needsReference;
    $("reference").required = needsReference;
  });
  $("source").addEventListener("change", () => showThumb($("source"), $("source-thumb")));
  $("target").addEventListener("change", () => showThumb($("target"), $("target-thumb")));
  $("preview-button").addEventListener("click", preview);
  $("swap-form").addEventListener("submit", submitJob);
  $("refresh-jobs").addEventListener("click", refreshJobs);
  refreshJobs();
});
