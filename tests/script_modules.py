"""The repository's scripts/ loaded as modules from their files, for the tests of their
functions (scripts/ is not a package)."""

import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(path: Path, name: str | None = None):
    """The module of the script file ``path``, executed once under ``name`` (default: its
    stem)."""
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
