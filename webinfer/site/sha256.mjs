// Incremental SHA-256 (FIPS 180-4): WebCrypto digests only whole buffers, and a weight shard is hashed as its
// bytes stream in, so that it never has to be held whole. update(bytes) any number of times, then hex().

const K = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

export class Sha256 {
  constructor() {
    this.h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    this.w = new Uint32Array(64);
    // a block not yet full; 256 bytes, so that V8 keeps its bytes off the JS heap (typed arrays up to 64 bytes
    // live on it, and move when it is compacted)
    this.tail = new Uint8Array(256).subarray(0, 64);
    this.tailLength = 0;
    this.length = 0;  // bytes hashed so far
    this.done = false;
  }

  // Compress the 64-byte blocks of `bytes` starting at `at`, `count` of them.
  blocks(bytes, at, count) {
    const w = this.w;
    const h = this.h;
    for (let b = 0; b < count; b++, at += 64) {
      for (let i = 0; i < 16; i++) {
        const j = at + 4 * i;
        w[i] = (bytes[j] << 24) | (bytes[j + 1] << 16) | (bytes[j + 2] << 8) | bytes[j + 3];
      }
      for (let i = 16; i < 64; i++) {
        const x = w[i - 15];
        const y = w[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        w[i] = (w[i - 16] + s0 + w[i - 7] + s1) | 0;
      }
      let a = h[0], c1 = h[1], c2 = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (k + S1 + ((e & f) ^ (~e & g)) + K[i] + w[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (S0 + ((a & c1) ^ (a & c2) ^ (c1 & c2))) | 0;
        k = g; g = f; f = e; e = (d + t1) | 0; d = c2; c2 = c1; c1 = a; a = (t1 + t2) | 0;
      }
      h[0] += a; h[1] += c1; h[2] += c2; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
    }
  }

  update(bytes) {
    if (this.done) throw new Error("sha256: update after hex()");
    this.length += bytes.length;
    let at = 0;
    if (this.tailLength) {
      const take = Math.min(64 - this.tailLength, bytes.length);
      this.tail.set(bytes.subarray(0, take), this.tailLength);
      this.tailLength += take;
      at = take;
      if (this.tailLength < 64) return this;
      this.blocks(this.tail, 0, 1);
      this.tailLength = 0;
    }
    const whole = Math.floor((bytes.length - at) / 64);
    this.blocks(bytes, at, whole);
    at += whole * 64;
    this.tail.set(bytes.subarray(at), 0);
    this.tailLength = bytes.length - at;
    return this;
  }

  // The digest as lowercase hex; ends the hash.
  hex() {
    if (!this.done) {
      const bits = this.length * 8;
      const pad = new Uint8Array(256).subarray(0, ((this.tailLength < 56 ? 56 : 120) - this.tailLength) + 8);
      pad[0] = 0x80;
      const view = new DataView(pad.buffer, pad.byteOffset, pad.length);
      view.setUint32(pad.length - 8, Math.floor(bits / 2 ** 32));
      view.setUint32(pad.length - 4, bits >>> 0);
      const length = this.length;
      this.update(pad);
      this.length = length;
      this.done = true;
    }
    return Array.from(this.h, (x) => x.toString(16).padStart(8, "0")).join("");
  }
}
