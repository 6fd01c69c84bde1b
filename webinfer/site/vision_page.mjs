// Shared by the detect and removebg pages: load the artifact, warm its kernels up, then run on an image that is
// picked, dropped or named in the URL (?image=URL on this origin); results land in #result's data attributes.
import { fileInputs, progressBar, query, showError, timingText } from "./ui.mjs";

/** RGBA8 pixels of a decoded image at its own size (an ImageData); window.webinferDemo keeps them. */
export function imagePixels(bitmap) {
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext("2d", { willReadFrequently: true });
  ctx.drawImage(bitmap, 0, 0);
  const image = ctx.getImageData(0, 0, bitmap.width, bitmap.height);
  window.webinferDemo = { input: image.data, width: image.width, height: image.height };  // for automated checks
  return image;
}

async function fetchImage(spec) {
  const url = new URL(spec, location.href);
  if (url.origin !== location.origin) throw new Error(`image must come from this site (${location.origin}), not ${url.origin}`);
  const r = await fetch(url);
  if (!r.ok) throw new Error(`GET ${url.pathname}: HTTP ${r.status}`);
  return r.blob();
}

export async function runImagePage(webinfer, warmUp, run) {
  const statusEl = document.getElementById("status");
  const resultEl = document.getElementById("result");
  const guard = (p) => p.catch((e) => showError(statusEl, resultEl, e));
  const go = async (session, blob) => {
    statusEl.textContent = "running…";
    await run(session, await createImageBitmap(blob));
    resultEl.dataset.done = "1";
    statusEl.textContent = "ready";
  };
  try {
    const session = await webinfer.load("artifact/", {
      onProgress: progressBar(document.getElementById("progress"), statusEl) });
    await warmUp(session);  // one run on a blank image compiles every kernel before the first real one
    const timings = { ...session.timings, ready_ms: Math.round(performance.now()) };
    document.body.dataset.ready = "1";
    document.getElementById("timings").textContent = timingText(timings);
    resultEl.dataset.timings = JSON.stringify(timings);
    statusEl.textContent = "ready: drop or pick an image";
    fileInputs((f) => guard(go(session, f)));
    const image = query().get("image");
    if (image) await go(session, await fetchImage(image));
  } catch (e) {
    showError(statusEl, resultEl, e);
  }
}
