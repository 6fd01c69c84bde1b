// One weight shard streamed from Cache Storage or the network: its bytes are handed on block by block as they
// arrive (never the whole shard in one buffer), hashed as they pass (sha256.mjs) and, when they came from the
// network, written to Cache Storage through the same stream, so that only a shard whose sha256 matched the
// manifest is ever stored and a reload resumes from the shards already cached.

import { Sha256 } from "./sha256.mjs";

export const BLOCK_BYTES = 1 << 20;  // handed on in blocks of this many bytes (a multiple of 4: writeBuffer's unit)

class Mismatch extends Error {}

// Streams the shard `entry` ({file, bytes, sha256}) at `url`: `sink(block, start, length)` gets consecutive
// blocks (`block` is reused: copy what you keep), `onBytes(n, cached)` counts bytes as they arrive.
// Resolves to {cached} once every byte is in and the sha256 matched; rejects otherwise.
export async function streamShard(cache, url, entry, sink, onBytes, blockBytes = BLOCK_BYTES) {
  const key = `${url}?sha256=${entry.sha256}`;
  let response = cache ? await cache.match(key) : undefined;
  const cached = Boolean(response);
  if (!response) {
    response = await fetch(url);
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  }
  const size = Math.max(4, blockBytes - (blockBytes % 4));
  const block = new Uint8Array(Math.min(size, Math.max(4, entry.bytes)));
  const hash = new Sha256();
  const reader = response.body.getReader();
  let received = 0;
  let fill = 0;  // bytes in `block`, which starts at shard byte received - fill
  let finished = false;

  // The next piece of the body (hashed and handed on), or null at its end once the shard checked out.
  async function next() {
    const { done, value } = await reader.read();
    if (done) {
      if (received !== entry.bytes) throw new Mismatch(`${url}: ${received} bytes, the manifest expects ${entry.bytes}`);
      if (fill) sink(block, received - fill, fill);
      fill = 0;
      if (hash.hex() !== entry.sha256) {
        if (cache && cached) await cache.delete(key);
        throw new Mismatch(`${url}: sha256 does not match the manifest (file altered or corrupt)`);
      }
      finished = true;
      return null;
    }
    if (received + value.length > entry.bytes) throw new Mismatch(`${url}: larger than the manifest says`);
    hash.update(value);
    let at = 0;
    while (at < value.length) {
      const take = Math.min(block.length - fill, value.length - at);
      block.set(value.subarray(at, at + take), fill);
      fill += take;
      at += take;
      received += take;
      if (fill === block.length) {
        sink(block, received - fill, fill);
        fill = 0;
      }
    }
    onBytes(value.length, cached);
    return value;
  }

  if (cache && !cached) {
    // Cache Storage reads the body at its own pace; each piece it pulls is written to the GPU first. A shard
    // that fails its check errors the stream, so the put fails and nothing is stored.
    let failure = null;
    const body = new ReadableStream({
      async pull(controller) {
        try {
          const value = await next();
          if (value) controller.enqueue(value);
          else controller.close();
        } catch (e) {
          failure = e;
          controller.error(e);
        }
      },
    });
    try {
      await cache.put(key, new Response(body));
    } catch (e) {
      if (failure) throw failure;
      // (a full quota must not fail the load: the next visit fetches this shard again)
      console.warn(`Cache Storage refused ${url}: ${e.message}`);
    }
  }
  while (!finished) await next();
  return { cached };
}
