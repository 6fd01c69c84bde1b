"""Run-time side: standard library only, so the same code runs in CPython and in Pyodide."""
