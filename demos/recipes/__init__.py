"""Model recipes: scripts that turn a model from a package registry into ONNX + tokenizer files."""
