// The page's prefix cache (webinfer/llm/prefix_cache.py): the KV cache of a chat's system prompt kept in Cache
// Storage between visits, keyed by the artifact's sha256, its kernel class and the system prompt's token ids
// (Python computes the key). A first turn looks its key up and hands what it finds to Python, which checks it
// (checksum, artifact, layout, ids) and restores it before the prefill; when nothing was restored, the turn's
// positions are read back once the reply is done and stored. A blob Python refuses is deleted, with one warning
// line on the console: the turn goes on with a cold prefill. Nothing is fetched: these entries are never requested
// from the server, Cache Storage only holds them under this site's own URLs.

const STORE = "webinfer-prefix-v1";

function entryURL(key) {
  return new URL(`webinfer-prefix/${key}`, self.location.href).href;
}

async function store() {
  try {
    return await caches.open(STORE);
  } catch (e) {
    console.warn(`webinfer: prefix cache unavailable (Cache Storage: ${e.message || e})`);
    return null;
  }
}

// A chat turn through WorkerHost.chat with the prefix cache; resolves to the turn's stats (with prefix_cache:
// {status: "restored" | "refused" | "saved" | "held", positions, warning, bytes, restore_ms, save_ms}).
export async function chatWithPrefixCache(h, handle, messages, options, onToken) {
  const messagesJSON = JSON.stringify(messages);
  const key = h.prefix_key(handle, messagesJSON);
  const cache = key ? await store() : null;
  let blob = null;
  const t = performance.now();
  if (cache) {
    const hit = await cache.match(entryURL(key));
    if (hit) blob = new Uint8Array(await hit.arrayBuffer());
  }
  const read_ms = performance.now() - t;
  const stats = JSON.parse(await h.chat(handle, messagesJSON, JSON.stringify(options), onToken, blob ?? undefined));
  const pc = stats.prefix_cache || { status: key ? "miss" : "held" };
  if (blob) pc.read_ms = Math.round(read_ms);
  if (pc.status === "refused") {
    console.warn(`webinfer: prefix cache ignored: ${pc.warning}`);
    await cache.delete(entryURL(key));
  }
  if (cache && pc.status !== "restored") {
    const t2 = performance.now();
    const proxy = await h.prefix_blob(handle);
    if (proxy) {
      let bytes;
      try {
        const view = proxy.getBuffer("u8");
        bytes = view.data.slice();
        view.release();
      } finally {
        proxy.destroy();
      }
      await cache.put(entryURL(key), new Response(bytes, { headers: { "content-type": "application/octet-stream" } }));
      Object.assign(pc, { saved: true, bytes: bytes.length, save_ms: Math.round(performance.now() - t2) });
    }
  }
  stats.prefix_cache = pc;
  return stats;
}
