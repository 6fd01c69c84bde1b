// Object detection: pick, drop or pass (?image=URL on this origin) an image; its raw RGBA8 pixels go to the
// artifact (session.detect), whose GPU prologue letterboxes them and whose GPU epilogue decodes the detector's
// head, thresholds, suppresses overlaps and maps the boxes back to the image; draw them over the picture.
import * as webinfer from "../assets/webinfer.mjs";
import { imagePixels, runImagePage } from "../assets/vision_page.mjs";

const view = document.getElementById("view");
const resultEl = document.getElementById("result");

function draw(bitmap, found) {
  view.width = bitmap.width;
  view.height = bitmap.height;
  const ctx = view.getContext("2d");
  ctx.drawImage(bitmap, 0, 0);
  ctx.lineWidth = Math.max(2, Math.round(bitmap.width / 300));
  ctx.font = `${Math.max(12, Math.round(bitmap.width / 40))}px sans-serif`;
  for (const { label, score, box: [x0, y0, x1, y1] } of found) {
    ctx.strokeStyle = "#e63946";
    ctx.strokeRect(x0, y0, x1 - x0, y1 - y0);
    const text = `${label} ${score.toFixed(2)}`;
    ctx.fillStyle = "#e63946";
    ctx.fillRect(x0, Math.max(0, y0 - 18), ctx.measureText(text).width + 6, 18);
    ctx.fillStyle = "#fff";
    ctx.fillText(text, x0 + 3, Math.max(14, y0 - 4));
  }
}

async function run(session, bitmap) {
  const image = imagePixels(bitmap);
  const t0 = performance.now();
  const found = await session.detect(image);
  const ms = (performance.now() - t0).toFixed(1);
  draw(bitmap, found);
  const list = document.createElement("ul");
  for (const d of found) {
    const li = document.createElement("li");
    li.textContent = `${d.label} ${d.score.toFixed(3)} [${d.box.map((v) => v.toFixed(0)).join(", ")}]`;
    list.append(li);
  }
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `${found.length} object(s) in a ${image.width}x${image.height} image, ${ms} ms (pre- and post-processing on the GPU)`;
  resultEl.replaceChildren(list, note);
  resultEl.dataset.detections = JSON.stringify(found);
}

runImagePage(webinfer, (session) => session.detect({ data: new Uint8Array(4 * 64 * 64), width: 64, height: 64 }), run);
