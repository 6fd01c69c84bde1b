// Index page: show the WebGPU adapter's name and limits, or a plain message when there is no WebGPU.
import { adapterText, NoWebGPU } from "./ui.mjs";

const el = document.getElementById("adapter");
const LIMITS = ["maxStorageBufferBindingSize", "maxBufferSize", "maxStorageBuffersPerShaderStage",
  "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupStorageSize", "maxComputeWorkgroupsPerDimension"];

async function show() {
  const cpu = " A page whose artifact carries a CPU path (build --cpu, the default with --web and for the " +
    "demos) runs on the CPU instead (onnxruntime-web wasm).";
  if (!navigator.gpu) throw new NoWebGPU("This browser has no WebGPU. Use a recent Chromium (on a machine " +
    "without a GPU, start it with --enable-unsafe-webgpu)." + cpu);
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new NoWebGPU("WebGPU is present but found no adapter." + cpu);
  const table = document.createElement("table");
  const row = (k, v) => {
    const tr = table.insertRow();
    tr.insertCell().textContent = k;
    tr.insertCell().textContent = v;
  };
  row("adapter", adapterText(adapter) || "(no adapter info)");
  for (const name of LIMITS) row(name, String(adapter.limits[name]));
  row("features", [...adapter.features].sort().join(", ") || "(none)");
  el.replaceChildren(table);
  el.dataset.adapter = adapterText(adapter);
}

show().catch((err) => {
  el.textContent = String(err && err.message ? err.message : err);
  el.className = "panel error";
}).finally(() => { el.dataset.done = "1"; });
