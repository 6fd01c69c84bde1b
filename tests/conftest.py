import os
import sys
import tempfile

os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="xdg-"))
sys.path.insert(0, os.path.dirname(__file__))
