// One call per task, as Python's webinfer.tasks.pipeline (and transformers.js's pipeline()): the artifact is
// opened in the page's worker once, and the returned function takes the input as the page has it.
//
//   const detect = await webinfer.pipeline("object-detection", "detect/artifact/");
//   for (const { label, score, box } of await detect("photo.png")) ...   // a URL, Blob, ImageBitmap, <img>,
//                                                                          // canvas or ImageData
// Tasks and what the returned function resolves to (fn.session is the Session/Chat/Seq2Seq behind it):
//   image-classification (image) -> [{label, score}], best first
//   object-detection (image) -> [{label, score, box: [x0, y0, x1, y1]}] in the image's pixels
//   image-segmentation (image) -> {width, height, segments: Int32Array class map, labels}
//   background-removal (image) -> {width, height, cutout: RGBA8 Uint8ClampedArray}
//   feature-extraction (text | [texts]) -> [vector, ...] (an artifact built with --sentence-embedding)
//   text-generation (messages | prompt, options, onToken) -> the reply's text; a prompt string is sent as one
//     user message (the model's chat template applies); options as chat.send's
//   translation (text, options, onToken) -> {translation_text, token_ids}
//   automatic-speech-recognition (audio, options, onToken) -> {text, token_ids}: audio as Seq2Seq.transcribe takes
//     it (a WAV Blob/File/bytes or a URL to one, a Float32Array of PCM with options.sampleRate, an AudioBuffer;
//     resampled and turned into log-mel on the GPU), or the encoder's own feeds, e.g. {input_features: {data,
//     dims: [1, 80, 3000]}}, for an artifact built with --preprocess none
//   options may carry onToken instead of the third argument.
import { chat, load, seq2seq } from "./webinfer.mjs";

const IMAGE = { "image-classification": "classify", "object-detection": "detect", "image-segmentation": "segment",
  "background-removal": "segment" };
const TEXT = ["feature-extraction", "text-generation", "translation", "automatic-speech-recognition"];

/** Open `url` for `task` (options as load()'s: onProgress, kernelClass...); resolves to an async function. */
export async function pipeline(task, url, options) {
  if (!(task in IMAGE) && !TEXT.includes(task)) {
    throw new Error(`unknown task ${task}; the tasks are: ${[...Object.keys(IMAGE), ...TEXT].sort().join(", ")}`);
  }
  let session, fn;
  if (task in IMAGE) {
    session = await load(url, options);
    const method = IMAGE[task];
    fn = async (image) => session[method](await imagePixels(image));
  } else if (task === "feature-extraction") {
    session = await load(url, options);
    fn = async (texts) => (await session.embeddings.create({ input: texts })).data.map((d) => d.embedding);
  } else if (task === "text-generation") {
    session = await chat(url, options);
    fn = async (prompt, opts, onToken) => {
      const messages = typeof prompt === "string" ? [{ role: "user", content: prompt }] : prompt;
      let text = "";
      for await (const t of session.send(messages, opts)) {
        text += t.text;
        onToken?.(t);
      }
      return text;
    };
  } else {
    session = await seq2seq(url, options);
    const key = task === "translation" ? "translation_text" : "text";
    fn = async (source, opts = {}, onToken) => {
      const { onToken: listener, ...rest } = opts;
      const stats = task === "automatic-speech-recognition" && !isFeeds(source)
        ? await session.transcribe(await audioInput(source), rest, onToken ?? listener)
        : await session.generate(task === "translation" ? String(source) : source, rest, onToken ?? listener);
      return { [key]: stats.text, token_ids: stats.token_ids };
    };
  }
  fn.session = session;
  fn.close = () => session.close();
  return fn;
}

/** RGBA8 pixels of an image as a page has it: ImageData or {data, width, height} as they are; a URL (same
 * origin rules as fetch), Blob, ImageBitmap, <img>, <canvas> or OffscreenCanvas drawn at its own size. */
export async function imagePixels(image) {
  if (image?.data && Number.isInteger(image.width) && Number.isInteger(image.height)) return image;
  let source = image;
  if (typeof image === "string" || image instanceof URL) {
    const r = await fetch(new URL(image, globalThis.document ? document.baseURI : location.href));
    if (!r.ok) throw new Error(`GET ${image}: HTTP ${r.status}`);
    source = await r.blob();
  }
  if (source instanceof Blob) source = await createImageBitmap(source);
  const width = source?.naturalWidth || source?.width, height = source?.naturalHeight || source?.height;
  if (!width || !height) throw new Error("expected an image: ImageData, {data, width, height}, a URL, Blob, ImageBitmap, <img> or canvas");
  const ctx = new OffscreenCanvas(width, height).getContext("2d", { willReadFrequently: true });
  ctx.drawImage(source, 0, 0);
  return ctx.getImageData(0, 0, width, height);
}

// The encoder's feeds ({name: {data, dims}}) rather than audio.
function isFeeds(x) {
  return x && typeof x === "object" && !(x instanceof Blob) && !ArrayBuffer.isView(x) && !(x instanceof ArrayBuffer)
    && !(typeof AudioBuffer !== "undefined" && x instanceof AudioBuffer) && !("sampleRate" in x)
    && Object.values(x).every((v) => v && typeof v === "object" && "dims" in v);
}

// A URL to a WAV file is fetched (same origin rules as fetch); the rest goes to Seq2Seq.transcribe as it is.
async function audioInput(audio) {
  if (typeof audio !== "string" && !(audio instanceof URL)) return audio;
  const r = await fetch(new URL(audio, globalThis.document ? document.baseURI : location.href));
  if (!r.ok) throw new Error(`GET ${audio}: HTTP ${r.status}`);
  return r.blob();
}
