// Background removal: pick, drop or pass (?image=URL on this origin) an image; its raw RGBA8 pixels go to the
// artifact (session.segment), which letterboxes them, runs the matting model and resizes the matte to the
// image on the GPU, applying it as alpha; show the cut-out over a checkerboard.
import * as webinfer from "../assets/webinfer.mjs";
import { imagePixels, runImagePage } from "../assets/vision_page.mjs";

const view = document.getElementById("view");
const resultEl = document.getElementById("result");

async function run(session, bitmap) {
  const image = imagePixels(bitmap);
  const t0 = performance.now();
  const out = await session.segment(image);
  const ms = (performance.now() - t0).toFixed(1);
  if (!out.cutout) throw new Error("this artifact gives a class map, not a matte (build it with --task background-removal)");
  view.width = out.width;
  view.height = out.height;
  view.getContext("2d").putImageData(new ImageData(out.cutout, out.width, out.height), 0, 0);
  window.webinferDemo.cutout = out.cutout;  // for automated checks
  const note = document.createElement("div");
  note.className = "stats";
  note.textContent = `${out.width}x${out.height} cut-out, ${ms} ms (matte resized and applied on the GPU)`;
  resultEl.replaceChildren(note);
}

runImagePage(webinfer, (session) => session.segment({ data: new Uint8Array(4 * 64 * 64), width: 64, height: 64 }), run);
