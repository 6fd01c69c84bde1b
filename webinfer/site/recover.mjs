// Surviving a lost GPU device in the page's worker (device.destroy(), a driver reset, out of memory): the worker
// watches `device.lost`; when it resolves, the worker opens a new adapter and device, writes every open session's
// weights again (from Cache Storage: no network) and re-opens the sessions under the handles the page holds
// (page_recover.py: a chat prefills its conversation into the new KV cache). An operation the loss cut short runs
// once more on the new device; what it had already streamed (tokens, chunks) is not sent twice, and a replay that
// differs from it ends the operation with one clear error instead. The next call inherits nothing: it waits for
// the recovery, or starts a new one if the last failed. The page hears {phase: "lost" | "recovered" | "failed"}.

// How long an operation that failed waits for `device.lost` to say whether the device was lost under it (the two
// arrive in either order). Only failures pay it.
const LOST_WAIT_MS = 500;

const sessions = new Map();  // handle -> {artifactURL, kind, kernelClass, manifest}: what recovery re-opens
let hooks = null;            // {openDevice(): {adapter, device}, reopen(g, handle, spec), notify(event)}
let current = null;          // the device being watched
let epoch = 0;               // counts losses
let lost = null;             // the loss not recovered from yet: {reason, message}
let pending = null;          // the running recovery
let last = null;             // the last recovery's report: {reason, message, ms (device_ms, weights_ms, reopen_ms),
                             //   sessions, restored_tokens}

export function configure(h) {
  hooks = h;
}

export function trackSession(handle, spec) {
  sessions.set(handle, spec);
}

export function untrackSession(handle) {
  sessions.delete(handle);
}

// Watch a newly opened device: its loss starts a recovery at once (the page may be idle).
export function watchDevice(device) {
  current = device;
  device.lost.then((info) => {
    if (device !== current) return;  // (an old device, already replaced)
    current = null;
    epoch += 1;
    lost = { reason: info?.reason || "unknown", message: String(info?.message || "").trim() };
    hooks?.notify({ phase: "lost", ...lost });
    start().catch(() => {});  // (its error is the next operation's)
  });
}

export function lostText(loss) {
  return `GPU device lost (${loss.reason}${loss.message ? `: ${loss.message}` : ""})`;
}

function start() {
  const loss = lost;
  pending ??= (async () => {
    const t = performance.now();
    const g = await hooks.openDevice();
    const report = { ...loss, device_ms: Math.round(performance.now() - t), weights_ms: 0, reopen_ms: 0,
      sessions: sessions.size, restored_tokens: 0 };
    for (const [handle, spec] of sessions) {
      const r = await hooks.reopen(g, handle, spec);  // {weights_ms, reopen_ms, restored_tokens}
      for (const k of ["weights_ms", "reopen_ms", "restored_tokens"]) report[k] += r[k];
    }
    report.ms = Math.round(performance.now() - t);
    if (lost === loss) lost = null;
    last = report;
    hooks.notify({ phase: "recovered", ...report, text: `${lostText(loss)}; recovered in ${report.ms} ms` });
    return report;
  })().catch((err) => {
    const detail = String(err.message || err).trim().split("\n").pop();  // (a Python error: its last line)
    const text = `${lostText(loss)} and not recovered: ${detail}`;
    hooks.notify({ phase: "failed", ...loss, text });
    throw new Error(text);
  }).finally(() => {
    pending = null;
  });
  return pending;
}

// Before an operation touches the GPU: wait for the running recovery, or start one after a failed one; a recovery
// that fails is this operation's error. Resolves to the last recovery's report.
export async function ready() {
  if (pending) await pending;
  else if (lost) await start();
  return last;
}

// Was the device lost while an operation that began at `at` (epoch, device) ran?
async function lostDuring(at) {
  if (epoch !== at.epoch) return true;
  if (!at.device) return false;
  const timer = new Promise((resolve) => setTimeout(() => resolve(false), LOST_WAIT_MS));
  return Promise.race([at.device.lost.then(() => true), timer]);
}

const STREAMED = new Set(["token", "chunk"]);
function streamKey(m) {
  return JSON.stringify(m.type === "token" ? m.token : m.chunk?.choices);
}

// Run `op(msg, post)`; if the device is lost under it, once more after the recovery, with what it streamed the
// first time held back (and checked). The result of a replayed chat carries `device_recovery` (the report).
export async function withRecovery(op, msg, post) {
  await ready();
  const at = { epoch, device: current };
  const seen = [];
  try {
    return await op(msg, (m) => {
      if (STREAMED.has(m.type)) seen.push(streamKey(m));
      post(m);
    });
  } catch (err) {
    if (!(await lostDuring(at))) throw err;
    const report = await ready();
    post({ type: "progress", progress: { phase: "recovered", ...report } });
    let replayed = 0;
    let diverged = false;
    const replay = (m) => {
      if (STREAMED.has(m.type) && replayed < seen.length) {
        if (streamKey(m) !== seen[replayed]) diverged = true;
        replayed += 1;
        if (diverged) throw new Error("replay diverged");  // (stops the generation)
        return;
      }
      post(m);
    };
    let value;
    try {
      value = await op(msg, replay);
    } catch (again) {
      const why = diverged ? `its replay differs from what was already streamed at item ${replayed}`
        : (again.message || String(again)).trim().split("\n").pop();
      throw new Error(`${lostText(report)} during ${msg.op}; the page recovered in ${report.ms} ms but the ` +
        `${msg.op} failed again (${why}): send it again`);
    }
    if (replayed < seen.length) {
      throw new Error(`${lostText(report)} during ${msg.op}; the page recovered in ${report.ms} ms but the replay ` +
        `streamed ${replayed} of the ${seen.length} items already sent: send it again`);
    }
    if (value && typeof value === "object" && !Array.isArray(value)) value.device_recovery = report;
    return value;
  }
}
