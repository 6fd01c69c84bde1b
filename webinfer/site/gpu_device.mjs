// The page's WebGPU device and the choice of program for it: the limits and features it asks for, a
// capped view to try a smaller device, and runtime/select.py's rule in JavaScript.

// The WebGPU adapter and device.
export async function openGPU(caps) {
  if (!navigator.gpu) {
    throw new Error("This browser has no WebGPU (navigator.gpu is missing in workers). Use a recent Chromium " +
      "on a page served from 127.0.0.1 or over HTTPS; without a GPU, start it with --enable-unsafe-webgpu.");
  }
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: "high-performance" });
  if (!adapter) throw new Error("navigator.gpu.requestAdapter() found no WebGPU adapter.");
  // The same limits and features BrowserDevice.create asks for: big weights need big bindings, and the kernel
  // classes that need shader-f16 or subgroups can be chosen where the adapter has them.
  const device = await adapter.requestDevice({
    requiredLimits: {
      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
      maxBufferSize: adapter.limits.maxBufferSize,
    },
    requiredFeatures: ["shader-f16", "subgroups"].filter((f) => adapter.features.has(f)),
  });
  return { adapter, device: caps ? capped(device, caps) : device };
}

// A device that reports limits no larger than `caps` (load(url, {deviceLimits})): WebGPU grants at least its
// defaults, so a smaller device is seen through this view, to try how a page behaves on one. Program choice,
// in the worker and in Python, reads these limits; everything else is the device itself.
function capped(device, caps) {
  const limits = {};
  for (const name in device.limits) limits[name] = Math.min(device.limits[name], caps[name] ?? Infinity);
  return new Proxy(device, {
    get: (target, key) => {
      if (key === "limits") return limits;
      const value = Reflect.get(target, key, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

// runtime/select.py's rule, kept in step with it (Python applies it again and the two must agree): the first
// program the device can run (features, WGSL language features, limits) that is tuned for this adapter's
// type, else the first it can run; `forced` (load(url, {kernelClass})) picks one by name.
const SOFTWARE_ADAPTERS = ["swiftshader", "llvmpipe", "lavapipe", "softpipe", "warp", "microsoft basic render"];
const LIMIT_NAMES = {
  "max-storage-buffers-per-shader-stage": "maxStorageBuffersPerShaderStage",
  "max-compute-invocations-per-workgroup": "maxComputeInvocationsPerWorkgroup",
  "max-compute-workgroup-storage-size": "maxComputeWorkgroupStorageSize",
  "max-storage-buffer-binding-size": "maxStorageBufferBindingSize",
  "max-buffer-size": "maxBufferSize",
};

export function adapterType(adapter) {
  const i = adapter.info || {};
  const text = [i.vendor, i.architecture, i.device, i.description].join(" ").toLowerCase();
  if (i.isFallbackAdapter || adapter.isFallbackAdapter || SOFTWARE_ADAPTERS.some((n) => text.includes(n))) return "cpu";
  return "unknown";  // browsers do not say integrated or discrete
}

export function chooseProgram(manifest, adapter, device, forced) {
  const has = (f) => device.features.has(f) || Boolean(navigator.gpu.wgslLanguageFeatures?.has(f));
  const missing = (p) => (p.requires.features || []).filter((f) => !has(f)).map((f) => `feature ${f}`).concat(
    Object.entries(p.requires.limits || {}).filter(([k, v]) => k in LIMIT_NAMES && device.limits[LIMIT_NAMES[k]] < v)
      .map(([k, v]) => `${k} ${v} (device: ${device.limits[LIMIT_NAMES[k]]})`));
  const runs = (p) => !missing(p).length;
  const programs = manifest.programs;
  if (forced) {
    const p = programs.find((q) => q.class === forced);
    if (!p) throw new Error(`kernel class ${forced} is not in this artifact`);
    if (!runs(p)) throw new Error(`kernel class ${forced} cannot run on this adapter: needs ${missing(p).join(", ")}`);
    return p;
  }
  const type = adapterType(adapter);
  const runnable = programs.filter(runs);
  // (before any weight shard is fetched: the page says why in one line instead of downloading what cannot run)
  if (!runnable.length) {
    throw new Error("no program of this artifact runs on this adapter: " +
      programs.map((p) => `${p.class} needs ${missing(p).join(", ")}`).join("; "));
  }
  return runnable.find((p) => p.adapter_types.includes(type)) || runnable[0];
}
