// onnxruntime's Web Worker (cpu.mjs starts it where the artifact's text boots Pyodide in the page's worker):
// ort_host.mjs's operations, over messages.

import { handle } from "./ort_host.mjs";

self.onmessage = ({ data }) => handle(data, (message, transfer = []) => self.postMessage(message, transfer));
self.postMessage({ type: "up" });  // (the page's worker starts Pyodide only then: see cpu.mjs startOrt)
