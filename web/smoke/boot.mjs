// Boot: load Pyodide from ./pyodide/ (the npm package, served locally), install webinfer's wheel,
// run main.py's run_page(), and publish the outputs on #outputs (data-outputs JSON, data-done="1").
import { loadPyodide } from "./pyodide/pyodide.mjs";

const statusEl = document.getElementById("status");
const outputsEl = document.getElementById("outputs");
const logEl = document.getElementById("log");
const timings = {};
const t0 = performance.now();

function log(line) {
  logEl.textContent += line + "\n";
  console.log(line);
}

function mark(name, since) {
  timings[name] = Math.round(performance.now() - since);
  return performance.now();
}

async function boot() {
  const here = new URL("./", location.href);
  const site = await (await fetch(new URL("site.json", here))).json();
  statusEl.textContent = "loading Pyodide…";
  let t = performance.now();
  const pyodide = await loadPyodide({
    indexURL: new URL("pyodide/", here).href,
    stdout: (s) => log(s),
    stderr: (s) => log("[stderr] " + s),
  });
  t = mark("load_pyodide_ms", t);
  statusEl.textContent = "installing webinfer…";
  await pyodide.loadPackage(new URL(site.wheel, here).href, { messageCallback: () => {} });
  t = mark("install_wheel_ms", t);
  const source = await (await fetch(new URL("main.py", here))).text();
  pyodide.runPython(source, { filename: "main.py" });
  statusEl.textContent = "running…";
  const runPage = pyodide.globals.get("run_page");
  const result = JSON.parse(await runPage(new URL(site.artifact, here).href, new URL(site.inputs, here).href));
  runPage.destroy();
  mark("python_total_ms", t);
  Object.assign(timings, result.timings);
  timings.total_ms = Math.round(performance.now() - t0);
  outputsEl.dataset.outputs = JSON.stringify(result.outputs);
  if (result.runs) outputsEl.dataset.runs = JSON.stringify(result.runs);
  outputsEl.dataset.timings = JSON.stringify(timings);
  outputsEl.dataset.adapter = result.adapter;
  outputsEl.textContent = Object.entries(result.outputs)
    .map(([name, o]) => `${name} ${o.dtype}[${o.shape}] = ${JSON.stringify(o.preview)}`).join("\n");
  statusEl.textContent = `done on ${result.adapter} in ${timings.total_ms} ms ` +
    `(Pyodide ${timings.load_pyodide_ms} ms, first run ${timings.first_run_ms} ms, ` +
    `second run ${timings.second_run_ms} ms)`;
}

boot().catch((err) => {
  const text = String(err && err.message ? err.message : err);
  console.error(text);
  statusEl.textContent = "failed";
  statusEl.className = "error";
  outputsEl.dataset.error = text;
  outputsEl.textContent = text;
}).finally(() => {
  outputsEl.dataset.done = "1";
});
