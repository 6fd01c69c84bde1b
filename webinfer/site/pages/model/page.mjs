// Generic page: boot, run the artifact once on inputs of ones, print output shapes and first values.
import { showError, startPage } from "../assets/webinfer.mjs";

const statusEl = document.getElementById("status");
const resultEl = document.getElementById("result");

async function runOnce(py) {
  const r = JSON.parse(await py.get("run_once")());
  resultEl.textContent = Object.entries(r.outputs)
    .map(([n, o]) => `${n}: ${o.dtype}[${o.shape}] ${JSON.stringify(o.head)}`).join("\n") + `\n(${r.run_ms} ms)`;
  resultEl.dataset.outputs = JSON.stringify(r.outputs);
  resultEl.dataset.done = "1";
}

async function main() {
  const { py, timings } = await startPage({ artifact: "artifact/", statusEl,
    progressEl: document.getElementById("progress") });
  document.getElementById("timings").textContent = `ready in ${timings.ready_ms} ms`;
  statusEl.textContent = "running…";
  await runOnce(py);
  statusEl.textContent = "done";
  const btn = document.getElementById("run");
  btn.disabled = false;
  btn.onclick = () => runOnce(py).catch((e) => showError(statusEl, resultEl, e));
}

main().catch((e) => showError(statusEl, resultEl, e));
