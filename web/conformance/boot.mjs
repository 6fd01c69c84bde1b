// Boot: load Pyodide once from ./pyodide/, install webinfer's wheel, run every case of site.json through
// main.py's run_cases(), and publish the raw outputs on #results (data-results JSON, data-done="1").
import { loadPyodide } from "./pyodide/pyodide.mjs";

const statusEl = document.getElementById("status");
const resultsEl = document.getElementById("results");
const t0 = performance.now();

async function boot() {
  const here = new URL("./", location.href);
  const site = await (await fetch(new URL("site.json", here))).json();
  statusEl.textContent = "loading Pyodide…";
  const pyodide = await loadPyodide({
    indexURL: new URL("pyodide/", here).href,
    stdout: (s) => console.log(s),
    stderr: (s) => console.log("[stderr] " + s),
  });
  const loadMs = Math.round(performance.now() - t0);
  await pyodide.loadPackage(new URL(site.wheel, here).href, { messageCallback: () => {} });
  const source = await (await fetch(new URL("main.py", here))).text();
  pyodide.runPython(source, { filename: "main.py" });
  statusEl.textContent = `running ${site.cases.length} cases…`;
  const runCases = pyodide.globals.get("run_cases");
  const result = JSON.parse(await runCases(here.href, JSON.stringify(site.cases)));
  runCases.destroy();
  result.load_pyodide_ms = loadMs;
  result.total_ms = Math.round(performance.now() - t0);
  resultsEl.dataset.results = JSON.stringify(result);
  const failed = Object.entries(result.cases).filter(([, r]) => r.error);
  resultsEl.textContent = `${Object.keys(result.cases).length} cases ran, ${failed.length} raised\n` +
    failed.map(([name, r]) => `${name}: ${r.error}`).join("\n");
  statusEl.textContent = `done on ${result.adapter} in ${result.total_ms} ms`;
}

boot().catch((err) => {
  const text = String(err && err.message ? err.message : err);
  console.error(text);
  statusEl.textContent = "failed";
  statusEl.className = "error";
  resultsEl.dataset.error = text;
  resultsEl.textContent = text;
}).finally(() => {
  resultsEl.dataset.done = "1";
});
