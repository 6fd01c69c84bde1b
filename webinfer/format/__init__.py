"""The artifact format both sides speak: the builder writes it, the runtime, ``report``, ``inspect`` and the
page read it. Standard library only (it runs in Pyodide).

- ``schema``: the manifest's typed objects (dataclasses), its constants and the weight shards' layout
- ``blocks``: the model-level blocks (image/audio prologue, task epilogues, an encoder-decoder's join), typed
- ``fields`` / ``checks``: reading the JSON into them field by field, and the cross-field rules
- ``manifest``: ``parse_manifest`` and ``check_step_shader``, the checked entry points
- ``textures``: the layout of a weight bound as a 2-D texture
- ``steps``: what a step and the build's guards mean at given dims (``step_runs``, ``check_dims``)
"""
