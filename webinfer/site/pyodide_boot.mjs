// Pyodide's boot for the page's worker: restored from the site's memory snapshot (site.json `pyodide_snapshot`,
// made at bundle time by webinfer/pyodide_snapshot.py) where there is one, which skips Python's own start (the
// longest step of a cold CPU-path visit); a plain boot otherwise. The snapshot is fetched, checked against its
// sha256 and unzipped while pyodide.mjs and pyodide.asm.mjs load. A missing, altered or foreign snapshot (Pyodide
// checks its build id) costs one console line and a plain boot, never a wrong interpreter.

import { Sha256 } from "./sha256.mjs";
import { hex } from "./weights.mjs";

async function digest(bytes) {
  if (globalThis.crypto?.subtle) return hex(await crypto.subtle.digest("SHA-256", bytes));
  const h = new Sha256();
  h.update(bytes);
  return h.hex();
}

// The snapshot's bytes (unzipped), or a rejection saying why not.
async function snapshotBytes(url, sha256) {
  const resp = await fetch(url);
  if (!resp.ok) throw new Error(`GET ${url}: HTTP ${resp.status}`);
  const packed = new Uint8Array(await resp.arrayBuffer());
  const got = await digest(packed);
  if (got !== sha256) throw new Error(`${url}: sha256 ${got} does not match site.json's ${sha256}`);
  const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("gzip"));
  const bytes = new Uint8Array(await new Response(stream).arrayBuffer());
  return { bytes, at: performance.now() };
}

// A booted Pyodide from `base` (its folder URL); `snapshot`: site.json's entry or undefined; `root`: the site's URL.
// Returns {pyodide, snapshot: true | false, snapshotAt: when its bytes were ready (performance.now()) or undefined}.
export async function bootPyodide(base, snapshot, root) {
  const bytes = snapshot ? snapshotBytes(new URL(snapshot.path, root).href, snapshot.sha256) : null;
  bytes?.catch(() => {});  // (awaited below; a failure means a plain boot)
  const { loadPyodide } = await import(new URL("pyodide.mjs", base).href);
  if (bytes) {
    try {
      const pyodide = await loadPyodide({ indexURL: base, _loadSnapshot: bytes.then((b) => b.bytes) });
      // the snapshot's interpreter has the state of the one that made it: reseed what visits must not share
      pyodide.runPython("import random; random.seed()");
      return { pyodide, snapshot: true, snapshotAt: (await bytes).at };
    } catch (e) {
      console.warn(`webinfer: Pyodide snapshot not used (${e?.message ?? e}); booting Pyodide plainly`);
    }
  } else {
    console.info("webinfer: this site has no Pyodide snapshot; booting Pyodide plainly");
  }
  return { pyodide: await loadPyodide({ indexURL: base }), snapshot: false };
}
