// Helpers the demo pages share: a weights progress bar, plain error display, the URL query.
export class NoWebGPU extends Error {}

export function adapterText(adapter) {
  const i = adapter.info || {};
  return [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(" ") +
    (adapter.isFallbackAdapter ? " (fallback adapter)" : "");
}

function mib(n) {
  return (n / 1048576).toFixed(1);
}

// onProgress for webinfer.load/chat that drives a <progress> and its label inside `el`.
export function progressBar(el, statusEl) {
  const bar = el.querySelector("progress");
  const label = el.querySelector(".progress-label");
  const phases = { python: "loading Python, the GPU device and the weights…", compile: "compiling kernels…" };
  return ({ phase, loaded, total, cached }) => {
    if (phase !== "weights") {
      if (statusEl && phases[phase]) statusEl.textContent = phases[phase];
      return;
    }
    bar.max = total || 1;
    bar.value = loaded;
    const pct = total ? Math.floor((100 * loaded) / total) : 100;
    label.textContent = `weights ${mib(loaded)} / ${mib(total)} MiB (${pct}%)${cached ? " from cache" : ""}`;
  };
}

export function timingText(t) {
  if (!t.python_ms) return `ready in ${t.ready_ms} ms (model ${t.weights_ms} ms, session ${t.session_ms} ms, in a worker)`;
  return `ready in ${t.ready_ms} ms (Python ${t.python_ms} ms, weights ${t.weights_ms} ms, ` +
    `kernels ${t.session_ms} ms, all in a worker)`;
}

// Which path a session runs (webinfer.load's path, pathWhy) in one phrase.
export function pathText(session) {
  return session.path === "cpu" ? `runs on the CPU: ${session.adapter}, because ${session.pathWhy}`
    : `runs on WebGPU (${session.pathWhy})`;
}

export function showError(statusEl, outEl, err) {
  const text = String(err && err.message ? err.message : err);
  console.error(text);
  statusEl.textContent = text;
  statusEl.className = "error";
  outEl.dataset.error = text;
  outEl.dataset.done = "1";
}

export function query() {
  return new URLSearchParams(location.search);
}

// The page's file input and drop zone (ids "file" and "drop") both hand the chosen file to `onFile`.
export function fileInputs(onFile) {
  document.getElementById("file").onchange = (e) => e.target.files[0] && onFile(e.target.files[0]);
  const drop = document.getElementById("drop");
  drop.ondragover = (e) => { e.preventDefault(); drop.classList.add("over"); };
  drop.ondragleave = () => drop.classList.remove("over");
  drop.ondrop = (e) => {
    e.preventDefault();
    drop.classList.remove("over");
    const f = e.dataTransfer.files[0];
    if (f) onFile(f);
  };
}
