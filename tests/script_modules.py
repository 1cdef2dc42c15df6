"""The repository's scripts/ loaded as modules from their files, for the tests of their
functions (scripts/ is not a package)."""

import importlib.util
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(path: Path | str, name: str | None = None):
    """The module of ``path`` (a file, or a script's stem under scripts/), executed once
    under ``name`` (default: the stem)."""
    path = Path(path) if str(path).endswith(".py") else SCRIPTS / f"{path}.py"
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
