// The CPU path's text side (page_cpu.py's CpuText: tokenizer, chat template, stream decoder) in a worker of its
// own, started by webinfer's worker (cpu.mjs). Pyodide's start is seconds of work on the thread that runs it;
// here it runs beside onnxruntime's session creation instead of taking turns with it on one thread, so where
// the machine has a second core the CPU path is ready in the longer of the two, not their sum.
//
// Messages in:  {id, op: "boot", pyodide, wheel}  {id, op: "open", tokenizer, config}  {id, op: METHOD, args}
// Messages out: {id, value} | {id, error}
// METHOD: encode(text) -> ids, options(json) -> json, chat_ids(json) -> ids, start(), push(id) -> text, flush() -> text.

let booted = null;
let text = null;

async function boot({ pyodide: base, wheel }) {
  const t = performance.now();
  const { loadPyodide } = await import(new URL("pyodide.mjs", base).href);
  const pyodide = await loadPyodide({ indexURL: base });
  const t2 = performance.now();
  await pyodide.loadPackage(wheel, { messageCallback: () => {} });
  const now = performance.now();
  return { pyodide, marks: { pyodide_boot_ms: Math.round(t2 - t), wheel_ms: Math.round(now - t2) } };
}

const METHODS = {
  encode: (s) => text.encode(s),
  options: (json) => text.options(json),
  chat_ids: (json) => text.chat_ids(json),
  start: () => text.start(),
  push: (token) => text.push(token),
  flush: () => text.flush(),
};

async function handle(msg) {
  if (msg.op === "boot") {
    booted ??= boot(msg);
    await booted;
    return null;
  }
  if (msg.op === "open") {
    if (!booted) throw new Error("the text worker was not booted");
    const { pyodide, marks } = await booted;
    const t = performance.now();
    text = pyodide.pyimport("webinfer.page_cpu").CpuText.from_texts(msg.tokenizer, msg.config ?? undefined);
    return { eos_token_id: text.eos_token_id, marks: { ...marks, text_open_ms: Math.round(performance.now() - t) } };
  }
  const method = METHODS[msg.op];
  if (!method) throw new Error(`text worker: unknown operation ${msg.op}`);
  if (!text) throw new Error("the text worker has no tokenizer open");
  const value = method(...(msg.args || []));
  if (value && typeof value.toJs === "function") {  // (a Python list: ids)
    try {
      return value.toJs();
    } finally {
      value.destroy();
    }
  }
  return value === undefined ? null : value;
}

// A Python exception arrives with its traceback: keep its last line, without webinfer's class path.
function errorText(err) {
  const lines = String(err && err.message ? err.message : err).trim().split("\n");
  return lines[lines.length - 1].replace(/^webinfer\.errors\.WebinferError: /, "");
}

self.onmessage = async (event) => {
  const msg = event.data;
  try {
    self.postMessage({ id: msg.id, value: await handle(msg) });
  } catch (err) {
    self.postMessage({ id: msg.id, error: errorText(err) });
  }
};
