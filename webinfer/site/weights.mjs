// Weights from the site into GPU buffers: each shard streamed (Cache Storage first, shard_stream.mjs), written
// block by block as its bytes arrive and checked against the manifest's sha256; never whole in an ArrayBuffer,
// never in Python's heap.

import { BLOCK_BYTES, streamShard } from "./shard_stream.mjs";

export const CACHE_NAME = "webinfer-weights-v1";

export function hex(buf) {
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, "0")).join("");
}

async function readBody(response, expected, onBytes) {
  const out = new Uint8Array(expected);
  let at = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (at + value.length > expected) throw new Error(`${response.url}: larger than the manifest says`);
    out.set(value, at);
    at += value.length;
    onBytes(value.length);
  }
  if (at !== expected) throw new Error(`${response.url}: ${at} bytes, the manifest expects ${expected}`);
  return out;
}

// Fetch one shard (Cache Storage first), check its size and sha256; returns its bytes, where they came from and
// `stored`, the promise of its Cache Storage copy. opts.marks gathers the ms spent reading, hashing and storing;
// opts.deferStore returns before the copy is stored (the caller awaits `stored` once it has gone on);
// opts.deferCheck returns as soon as the bytes are in, with `checked` too: the promise of the sha256 check (it
// rejects on a mismatch, and the copy is deleted), which the caller awaits before it uses the bytes.
export async function fetchShard(cache, url, entry, onBytes, opts = {}) {
  const key = `${url}?sha256=${entry.sha256}`;
  const marks = opts.marks || {};
  let t = performance.now();
  const lap = (name) => {
    const now = performance.now();
    marks[name] = (marks[name] || 0) + Math.round(now - t);
    t = now;
  };
  let response = cache ? await cache.match(key) : undefined;
  const cached = Boolean(response);
  if (!response) {
    response = await fetch(url);
    if (!response.ok) throw new Error(`GET ${url}: HTTP ${response.status}`);
  }
  const bytes = await readBody(response, entry.bytes, (n) => onBytes(n, cached));
  lap("read_ms");
  if (opts.deferCheck) {  // the caller awaits `checked` before it uses what it made of the bytes
    // stored at once, beside the check: every reader checks the sha256 again, and a mismatch deletes the copy
    const stored = store(cache, cached, key, url, bytes, marks);
    const checked = digestOf(bytes, marks, t).then(async (digest) => {
      if (digest === entry.sha256) return;
      await stored;
      if (cache) await cache.delete(key);
      throw new Error(`${url}: sha256 does not match the manifest (file altered or corrupt)`);
    });
    checked.catch(() => {});
    return { bytes, cached, checked, stored };
  }
  if (await digestOf(bytes, marks, t) !== entry.sha256) {
    if (cache) await cache.delete(key);
    throw new Error(`${url}: sha256 does not match the manifest (file altered or corrupt)`);
  }
  const stored = store(cache, cached, key, url, bytes, marks);
  if (!opts.deferStore) await stored;
  return { bytes, cached, stored };
}

async function digestOf(bytes, marks, t) {
  const digest = hex(await crypto.subtle.digest("SHA-256", bytes));
  marks.sha256_ms = Math.round(performance.now() - t);
  return digest;
}

// The Cache Storage copy of the bytes (none when they came from there); resolves once stored (or refused: a full
// quota must not fail the load, the next visit fetches them again).
function store(cache, cached, key, url, bytes, marks) {
  if (!cache || cached) return Promise.resolve();
  const t0 = performance.now();
  return cache.put(key, new Response(bytes)).then(() => {
    marks.cache_put_ms = Math.round(performance.now() - t0);
  }, (e) => console.warn(`Cache Storage refused ${url}: ${e.message}`));
}

// A weight bound as a texture (the program's `textures`), laid out as webinfer/format/textures.py says: texels
// row by row, a power-of-two width of at least 256 texels (a shorter tensor: its count rounded up), at most
// 8192 rows and columns. Returns [width, height].
const TEXEL_BYTES = { rgba32uint: 16, rg32float: 8, r32float: 4 };
function pow2AtLeast(n) {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}
export function textureSize(nbytes, format) {
  const texels = Math.max(1, Math.ceil(nbytes / TEXEL_BYTES[format]));
  const width = Math.max(pow2AtLeast(Math.min(texels, 256)), pow2AtLeast(Math.ceil(texels / 8192)));
  const height = Math.ceil(texels / width);
  if (!(format in TEXEL_BYTES) || width > 8192 || height > 8192) {
    throw new Error(`a weight of ${nbytes} bytes cannot be a ${format} texture`);
  }
  return [width, height];
}

// A weight bound as a texture, written a group of rows at a time as its bytes arrive (a tensor's chunks come in
// order, shard after shard): only those rows are held, and the last, partial row is padded with zeros.
const ROW_GROUP_BYTES = 1 << 20;
class TextureRows {
  constructor(device, texture, width, texel, nbytes) {
    Object.assign(this, { device, texture, width, nbytes, row: width * texel, y: 0, filled: 0, pending: null });
  }

  // `bytes` of the tensor at byte `dst` (the bytes just after those already given). The rows are allocated at
  // the first bytes and let go after the last, so only the textures being written hold any.
  set(bytes, dst) {
    const rows = Math.min(Math.max(1, Math.floor(ROW_GROUP_BYTES / this.row)), Math.ceil(this.nbytes / this.row));
    this.pending ??= new Uint8Array(rows * this.row);
    let at = 0;
    while (at < bytes.length) {
      const off = dst + at - this.y * this.row;
      const take = Math.min(bytes.length - at, this.pending.length - off);
      this.pending.set(bytes.subarray(at, at + take), off);
      at += take;
      this.filled = off + take;
      if (this.filled === this.pending.length) this.flush();
    }
    if (dst + bytes.length >= this.nbytes) {
      this.flush();
      this.pending = null;
    }
  }

  flush() {
    const rows = Math.ceil(this.filled / this.row);
    if (!rows) return;
    this.device.queue.writeTexture({ texture: this.texture, origin: [0, this.y] }, this.pending,
      { bytesPerRow: this.row, rowsPerImage: rows }, [this.width, rows]);
    this.y += rows;
    this.filled = 0;
    this.pending.fill(0);
  }
}

// The part of each weight chunk [target, offset, size, dst] of a shard that falls in the block of the shard's
// bytes [start, start + length): into a GPU buffer (writeBuffer: 4-byte units, a chunk's odd tail padded with
// zeros inside the buffer's rounded-up size) or a texture's rows.
function writeBlock(device, chunks, block, start, length) {
  const end = start + length;
  for (const [target, offset, size, dst] of chunks) {
    const lo = Math.max(offset, start);
    const hi = Math.min(offset + size, end);
    if (lo >= hi) continue;
    const at = dst + lo - offset;
    if (target instanceof TextureRows) {
      target.set(block.subarray(lo - start, hi - start), at);
    } else if ((hi - lo) % 4) {
      const padded = new Uint8Array(Math.ceil((hi - lo) / 4) * 4);
      padded.set(block.subarray(lo - start, hi - start));
      device.queue.writeBuffer(target, at, padded);
    } else {
      device.queue.writeBuffer(target, at, block, lo - start, hi - lo);
    }
  }
}

// One storage buffer per weight tensor the program reads, as SessionCore._upload_weights makes them; every
// chunk is written from its shard with queue.writeBuffer as its bytes arrive. A weight the program binds as a
// texture is written row group by row group (TextureRows). Returns [[tensorId, GPUBuffer | GPUTexture], ...].
export async function loadWeights(device, artifactURL, manifest, progress, program = manifest.programs[0],
  blockBytes = BLOCK_BYTES) {
  const usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST;
  const pairs = [];
  const perShard = manifest.shards.map(() => []);
  const textureFormats = new Map(program.textures || []);
  program.weights.forEach((tid) => {
    const t = manifest.tensors[tid];
    for (const d of t.shape) {
      if (!Number.isInteger(d)) throw new Error(`weight tensor ${tid} has a symbolic shape`);
    }
    // the bytes its chunks write: 4 per element, less for packed types (int4, bfloat16, float8...)
    let nbytes = 0;
    for (const [, , size, dst] of t.chunks) nbytes = Math.max(nbytes, dst + size);
    if (textureFormats.has(tid)) {
      const format = textureFormats.get(tid);
      const [width, height] = textureSize(nbytes, format);
      const texture = device.createTexture({
        size: [width, height], format,  // (COPY_SRC: tests read it back)
        usage: GPUTextureUsage.TEXTURE_BINDING | GPUTextureUsage.COPY_DST | GPUTextureUsage.COPY_SRC,
      });
      const rows = new TextureRows(device, texture, width, TEXEL_BYTES[format], nbytes);
      pairs.push([tid, texture]);
      for (const [shard, offset, size, dst] of t.chunks) if (size) perShard[shard].push([rows, offset, size, dst]);
      return;
    }
    const buffer = device.createBuffer({ size: Math.max(16, Math.ceil(nbytes / 16) * 16), usage });
    pairs.push([tid, buffer]);
    for (const [shard, offset, size, dst] of t.chunks) if (size) perShard[shard].push([buffer, offset, size, dst]);
  });
  const total = manifest.shards.reduce((s, e) => s + e.bytes, 0);
  let loaded = 0;
  let fromCache = 0;
  let cache = null;
  try {
    cache = await caches.open(CACHE_NAME);
  } catch (e) {
    console.warn("Cache Storage unavailable; weights will be fetched every visit:", e);
  }
  progress({ phase: "weights", loaded: 0, total, cached: false });
  for (let i = 0; i < manifest.shards.length; i++) {
    const entry = manifest.shards[i];
    const url = new URL(entry.file, artifactURL).href;
    const sink = (block, start, length) => writeBlock(device, perShard[i], block, start, length);
    const { cached } = await streamShard(cache, url, entry, sink, (n, fromCacheNow) => {
      loaded += n;
      progress({ phase: "weights", loaded, total, cached: fromCacheNow });
    }, blockBytes);
    if (cached) fromCache += 1;
    await device.queue.onSubmittedWorkDone();  // (the GPU process has taken this shard's writes)
  }
  return { pairs, total, fromCache, shards: manifest.shards.length };
}
