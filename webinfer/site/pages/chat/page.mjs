// Chat: a conversation with a generation artifact through webinfer.chat (the model runs in a Web Worker, which
// keeps the KV cache across turns and prefills only each new turn). The page shows the history; "New chat"
// starts over; Stop cancels after the current token. ?prompt=...&max_new_tokens=N&greedy=1&seed=S sends the
// first message at once; ?system=... sets the system prompt, whose KV cache the worker keeps in Cache Storage and
// restores on the next visit (?prefix_cache=0 turns that off); ?path=cpu|gpu forces a path (without WebGPU the CPU
// model runs on onnxruntime-web). The reply being written is #answer, with
// data-token-ids, data-prompt-ids (the whole conversation's ids), data-stats, data-first-token-ms (from Send to
// the first token, in the page) and data-done (or data-error) for automated checks. A lost GPU device is recovered
// by the worker; the status line says so (#history's data-device: the last event).
import * as webinfer from "../assets/webinfer.mjs";
import { pathText, progressBar, query, showError, timingText } from "../assets/ui.mjs";

const statusEl = document.getElementById("status");
const historyEl = document.getElementById("history");
const statsEl = document.getElementById("stats");
const sendBtn = document.getElementById("send");
const stopBtn = document.getElementById("stop");
const newBtn = document.getElementById("new");
const promptEl = document.getElementById("prompt");
const greedyEl = document.getElementById("greedy");
const maxEl = document.getElementById("max");
const systemEl = document.getElementById("system");
const messages = [];
let timings = {};

function fmt(v, digits = 1) {
  return v === null || v === undefined ? "–" : Number(v).toFixed(digits);
}

function bubble(role, text) {
  const el = document.createElement("div");
  el.className = `msg ${role}`;
  el.textContent = text;
  historyEl.append(el);
  return el;
}

function busy(on) {
  sendBtn.disabled = on;
  newBtn.disabled = on;
  stopBtn.disabled = !on;
}

async function send(chat, seed) {
  const text = promptEl.value;
  if (!text.trim()) throw new Error("the message is empty");
  messages.push({ role: "user", content: text });
  bubble("user", text);
  document.getElementById("answer")?.removeAttribute("id");
  const answer = bubble("assistant", "");
  answer.id = "answer";
  answer.dataset.timings = JSON.stringify(timings);
  historyEl.dataset.history = JSON.stringify(messages);
  promptEl.value = "";
  statusEl.textContent = "generating…";
  statusEl.className = "status";
  busy(true);
  const ids = [];
  const system = systemEl.value.trim() ? [{ role: "system", content: systemEl.value }] : [];
  const started = performance.now();
  const options = { maxNewTokens: Number(maxEl.value), seed,
    ...(greedyEl.checked ? { temperature: 0 } : { temperature: 0.7, topP: 0.9 }) };
  try {
    for await (const t of chat.send([...system, ...messages], options)) {
      if (!ids.length) answer.dataset.firstTokenMs = String(Math.round(performance.now() - started));
      ids.push(t.id);
      answer.textContent += t.text;
      answer.dataset.tokenIds = JSON.stringify(ids);
    }
  } catch (err) {
    messages.pop();  // not part of the conversation: the model never answered it
    historyEl.dataset.history = JSON.stringify(messages);
    promptEl.value = text;
    answer.classList.add("error");
    answer.textContent = String(err.message || err);
    throw err;
  } finally {
    busy(false);
  }
  const st = chat.stats;
  answer.textContent = st.text;
  messages.push({ role: "assistant", content: st.text });
  historyEl.dataset.history = JSON.stringify(messages);
  const used = st.prompt_ids.length + st.token_ids.length;
  statsEl.textContent = `${st.prompt_ids.length} conversation tokens (${st.reused_tokens} reused from the cache, ` +
    `${st.prompt_ids.length - st.reused_tokens} prefilled), ${st.token_ids.length} generated · first token ` +
    `after ${fmt(st.ttft_s, 2)} s · decode ${fmt(st.decode_tok_s, 2)} tok/s · ${used} of ${chat.maxSeq} ` +
    `positions${st.cancelled ? " · stopped" : ""}${prefixText(st.prefix_cache)}${deviceText(st.device_recovery)}`;
  answer.dataset.tokenIds = JSON.stringify(st.token_ids);
  answer.dataset.promptIds = JSON.stringify(st.prompt_ids);
  answer.dataset.stats = JSON.stringify(st);
  answer.dataset.done = "1";
  statusEl.textContent = "ready";
}

function prefixText(pc) {
  if (!pc || pc.status === "held") return "";
  if (pc.status === "restored") return ` · system prompt restored from this browser (${pc.positions} positions)`;
  if (pc.status === "refused") return ` · saved system prompt ignored: ${pc.warning}`;
  return pc.saved ? ` · system prompt kept for your next visit (${(pc.bytes / 1e6).toFixed(1)} MB)` : "";
}

function deviceText(r) {
  return r ? ` · GPU device lost (${r.reason}); recovered in ${r.ms} ms, conversation restored` : "";
}

function newChat() {
  messages.length = 0;
  historyEl.replaceChildren();
  historyEl.dataset.history = "[]";
  statsEl.textContent = "";
  statusEl.textContent = "new conversation";
  statusEl.className = "status";
}

async function main() {
  const q = query();
  if (q.has("prompt")) promptEl.value = q.get("prompt");
  if (q.has("max_new_tokens")) maxEl.value = q.get("max_new_tokens");
  if (q.has("system")) {
    systemEl.value = q.get("system");
    document.getElementById("system-box").open = true;
  }
  if (q.has("greedy")) greedyEl.checked = q.get("greedy") === "1";
  const seed = Number(q.get("seed") || 0);
  if (!Number.isInteger(seed) || seed < 0) throw new Error("seed must be a non-negative integer");
  const chat = await webinfer.chat("artifact/", { prefixCache: q.get("prefix_cache") !== "0", path: q.get("path") || undefined,
    onProgress: progressBar(document.getElementById("progress"), statusEl) });
  timings = chat.timings;
  document.body.dataset.ready = "1";
  document.getElementById("timings").textContent = `${timingText(timings)}; ${pathText(chat)}`;
  historyEl.dataset.path = JSON.stringify({ path: chat.path, why: chat.pathWhy });
  historyEl.dataset.timings = JSON.stringify(timings);
  statusEl.textContent = "ready";
  webinfer.onDevice((e) => {  // the worker re-creates a lost device by itself (recover.mjs)
    statusEl.textContent = e.phase === "lost" ? `GPU device lost (${e.reason}); recovering…` : e.text;
    statusEl.className = e.phase === "failed" ? "error" : "status";
    historyEl.dataset.device = JSON.stringify(e);
  });
  const guard = (p) => p.catch((e) => showError(statusEl, document.getElementById("answer") || historyEl, e));
  busy(false);
  sendBtn.onclick = () => guard(send(chat, seed));
  stopBtn.onclick = () => chat.cancel();
  newBtn.onclick = newChat;
  if (q.has("prompt")) await guard(send(chat, seed));
}

main().catch((e) => showError(statusEl, document.getElementById("answer") || historyEl, e));
