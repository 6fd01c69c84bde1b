// onnxruntime-web's host on the CPU path: the operations of a thread that runs onnxruntime for the page's worker
// (cpu.mjs). Where the artifact's text needs Pyodide (a tokenizer), they run in a Web Worker of their own
// (ort_worker.mjs): onnxruntime's start (wasm compiled, threads started), the CPU model's fetch (Cache Storage
// first, sha256-checked like every file), the session's creation and chat's decode loop run there while the
// page's worker boots Pyodide, so on two cores the two starts overlap instead of taking turns on one thread
// (onnxruntime-web's own proxy worker, `env.wasm.proxy`, is refused inside a worker: it needs a document). The
// decode loop lives here, so a token costs no round trip: each one is posted on, and its text is made in Pyodide
// (page_cpu.py) on the other thread. Without Pyodide there is nothing to overlap: the same operations run in the
// page's worker itself (cpu.mjs), over the same messages.
//
// Messages in:  {op: "init", base, origin}  {id, op: "open", handle, url, entry, manifest, kind, labels}
//               {id, op: "run", handle, feeds}  {id, op: "classify", handle, pixels, width, height}
//               {id, op: "chat", handle, ids, options, eos}  {op: "cancel", handle}  {id, op: "close", handle}
// Messages out: {id, type: "progress", progress}  {id, type: "token", token}  {id, type: "result", value}
//               {id, type: "error", message}
// `base`: the site's ort/ folder; `origin`: the page worker's start (epoch ms): the timeline's zero.

import { CpuChat } from "./cpu-chat.mjs";
import { CpuSession, SESSION_OPTIONS, ortStart, ortWeb } from "./cpu_session.mjs";
import { CACHE_NAME, fetchShard } from "./weights.mjs";

const PROGRESS_BYTES = 1 << 20;  // bytes between two progress messages (each crosses two threads)

let origin = performance.timeOrigin;
const sessions = new Map();

// ms since the page worker's start, on its clock
const since = (t) => Math.round(performance.timeOrigin + t - origin);

// The CPU model fetched, its session made (a chat's warmed up by one short step) while its sha256 is checked and
// then its Cache Storage copy stored. Resolves to what cpu.mjs's load answers with, and the marks of each phase.
async function open({ handle, url, entry, manifest, kind, labels, base }, post) {
  const ortLoaded = ortWeb(base);
  ortLoaded.catch(() => {});  // (awaited below)
  const marks = {};
  const t = performance.now();
  const cache = await caches.open(CACHE_NAME).catch(() => null);
  let loaded = 0;
  let posted = 0;
  const { bytes, cached, checked, stored } = await fetchShard(cache, url, entry, (n, c) => {
    loaded += n;
    if (loaded - posted < PROGRESS_BYTES && loaded < entry.bytes) return;
    posted = loaded;
    post({ type: "progress", progress: { phase: "weights", loaded, total: entry.bytes, cached: c } });
  }, { marks, deferCheck: true });
  const t1 = performance.now();
  post({ type: "progress", progress: { phase: "compile" } });
  const ort = await ortLoaded;
  const t2 = performance.now();
  // the session is made while the bytes' sha256 is checked (off this thread), and used only once it matched
  const creating = ort.InferenceSession.create(bytes, SESSION_OPTIONS);
  creating.catch(() => {});
  try {
    await checked;
  } catch (e) {
    creating.then((s) => s.release(), () => {});
    throw e;
  }
  const made = await creating;
  const t3 = performance.now();
  const session = kind === "chat" ? new CpuChat(ort, made, manifest) : new CpuSession(ort, made, manifest, labels);
  if (kind === "chat") await session.warmUp();
  const t4 = performance.now();
  await stored;
  sessions.set(handle, session);
  const timeline = { ort_init: [since(ortStart.begin), since(ortStart.end)], weights: [since(t), since(t1)], session: [since(t2), since(t3)],
    ...(kind === "chat" ? { warm_up: [since(t3), since(t4)] } : {}), stored: [since(t), since(performance.now())] };
  return { threads: ort.env.wasm.numThreads, max_seq: session.maxSeq, timeline,
    marks: { ...marks, ort_init_ms: Math.round(ortStart.end - ortStart.begin), weights_ms: Math.round(t1 - t), shards_from_cache: cached ? 1 : 0,
      session_ms: Math.round(t4 - t2) } };
}

function session(handle) {
  const s = sessions.get(handle);
  if (!s) throw new Error(`no open session ${handle} (closed?)`);
  return s;
}

const OPS = {
  open,
  run: ({ handle, feeds }) => session(handle).run(feeds),
  classify: ({ handle, pixels, width, height }) => session(handle).classify(pixels, width, height),
  chat: ({ handle, ids, options, eos }, post) => session(handle).chat(ids, options, eos, (token) => post({ type: "token", token })),
  close: async ({ handle }) => {
    const s = session(handle);
    sessions.delete(handle);
    await s.close();
    return null;
  },
};

// One message in; `send(message, transfer)` answers it.
export async function handle(msg, send) {
  if (msg.op === "init") {  // (no answer: open awaits the runtime, and says why it failed)
    origin = msg.origin;
    ortWeb(msg.base).catch(() => {});
    return;
  }
  if (msg.op === "cancel") {  // answered by the chat's own result, which stops after the current step
    sessions.get(msg.handle)?.cancel?.();
    return;
  }
  const post = (m) => send({ id: msg.id, ...m });
  try {
    const op = OPS[msg.op];
    if (!op) throw new Error(`unknown operation ${msg.op}`);
    const value = await op(msg, post);
    const transfer = Array.isArray(value) ? value.map((o) => o.data).filter((d) => d instanceof ArrayBuffer) : [];
    send({ id: msg.id, type: "result", value }, transfer);
  } catch (err) {
    console.error(err);
    post({ type: "error", message: String(err && err.message ? err.message : err) });
  }
}
