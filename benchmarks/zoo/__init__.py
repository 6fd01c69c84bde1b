"""The zoo: real models that packages ship (models.json), built as they are and compared with onnxruntime."""
