// One call per task, as Python's webinfer.pipeline(task, artifact): open the artifact in the page's worker and get
// back a function of the input as the user has it (webinfer.mjs re-exports `pipeline`).
//
//   const asr = await webinfer.pipeline("automatic-speech-recognition", "whisper/artifact/");
//   const { text } = await asr(wavFile, { onToken: (t) => (el.textContent += t.text) });   // or (pcm, {sampleRate})
//   const detector = await webinfer.pipeline("object-detection", "detect/artifact/");
//   const boxes = await detector(imageData);                                                // [{label, score, box}]
import { load, seq2seq } from "./webinfer.mjs";

// task -> (url, loadOptions) -> the task's function; `fn.session` is the session underneath.
const TASKS = {
  "automatic-speech-recognition": async (url, o) => {
    const s = await seq2seq(url, o);
    return withSession(s, async (audio, { onToken, ...options } = {}) => {
      const stats = await s.transcribe(audio, options, onToken);
      return { text: stats.text, token_ids: stats.token_ids };
    });
  },
  "translation": async (url, o) => {
    const s = await seq2seq(url, o);
    return withSession(s, async (text, { onToken, ...options } = {}) => {
      const stats = await s.generate(String(text), options, onToken);
      return { translation_text: stats.text, token_ids: stats.token_ids };
    });
  },
  "image-classification": async (url, o) => {
    const s = await load(url, o);
    return withSession(s, (image) => s.classify(image));
  },
  "object-detection": async (url, o) => {
    const s = await load(url, o);
    return withSession(s, (image) => s.detect(image));
  },
  "image-segmentation": async (url, o) => {
    const s = await load(url, o);
    return withSession(s, (image) => s.segment(image));
  },
};
TASKS["background-removal"] = TASKS["image-segmentation"];

function withSession(session, fn) {
  fn.session = session;
  fn.close = () => session.close();
  return fn;
}

/** A function for `task` over the artifact at `url` (options as webinfer.load's: onProgress, path, ...). */
export async function pipeline(task, url, options) {
  const open = TASKS[task];
  if (!open) throw new Error(`unknown task ${task} (one of ${Object.keys(TASKS).join(", ")})`);
  return open(url, options);
}
