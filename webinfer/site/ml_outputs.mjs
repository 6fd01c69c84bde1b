// Classic-ML outputs as Python's InferenceSession.run returns them (runtime/ml_outputs.py), from the manifest's
// output_formats block: a ZipMap's float [rows, classes] tensor becomes one {label: probability} object per row,
// a classifier's int64 class indices its string labels. The numbers come from the GPU; this only formats them.
// (Integer labels become the objects' keys as strings: "0", "1", ... as any JavaScript object key.)

function rows(tensor) {
  const values = Array.from(tensor.data, Number);
  if (tensor.dims.length < 2) return values;
  const cols = Number(tensor.dims.at(-1));
  const out = [];
  for (let i = 0; i < values.length; i += cols) out.push(values.slice(i, i + cols));
  return out;
}

function format(fmt, tensor) {
  const labels = fmt.labels;
  if (fmt.kind === "zipmap") {
    return rows(tensor).map((row) => Object.fromEntries(labels.map((label, i) => [String(label), row[i]])));
  }
  return rows(tensor).map((i) => (i >= 0 && i < labels.length ? labels[i] : ""));
}

/** `outputs` ({name: Tensor}) with each output the formats name replaced by its presented form. */
export function present(formats, outputs) {
  for (const fmt of formats || []) {
    if (fmt.output in outputs) outputs[fmt.output] = format(fmt, outputs[fmt.output]);
  }
  return outputs;
}
