"""Peer benchmarks for webinfer (``webinfer bench``): every engine runs the same models, checked against
onnxruntime CPU before its time counts. Lives beside the package, not in it: it needs the checkout's
web/ folder (Pyodide, onnxruntime-web) and the peers' wheels."""
