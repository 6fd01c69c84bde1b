// The worker's side of the vision tasks (webinfer.mjs: session.detect, session.segment): RGBA8 pixels go to
// Python (page.py WorkerHost.vision), which runs the artifact's GPU prologue and epilogue; the result comes
// back as JSON plus, for segment, the image-sized bytes (cut-out RGBA8 or int32 class map).

export async function visionTask({ handle, task, pixels, width, height }, host, cpuSession) {
  if (cpuSession(handle)) throw new Error(`${task} runs on the WebGPU path only; this session runs on the CPU`);
  const h = await host();
  const out = await h.vision(handle, task, new Uint8Array(pixels), width, height);
  try {
    const [meta, data] = out.toJs();
    const value = JSON.parse(meta);
    if (data) value.data = new Uint8Array(data).buffer;
    return value;
  } finally {
    out.destroy();
  }
}
