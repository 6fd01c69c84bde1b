// A worker's reply to one of the calls waiting in `pending` (id -> {resolve, reject, onMessage}): "result"
// settles it, "error" rejects it with the worker's message, anything else (progress, tokens) goes to its
// onMessage. The JS API (the page's worker) and the CPU path (onnxruntime's worker) speak the same replies.
export function settle(pending, data) {
  const call = pending.get(data.id);
  if (!call) return;
  if (data.type === "result") {
    pending.delete(data.id);
    call.resolve(data.value);
  } else if (data.type === "error") {
    pending.delete(data.id);
    call.reject(new Error(data.message));
  } else {
    call.onMessage?.(data);
  }
}
