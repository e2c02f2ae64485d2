"""Where the data that ships with perfmodel lives: a folder packaged into the wheel under
perfmodel/ (pyproject.toml's package-dir maps hwspecs/, models/ and validate/<name>/ there), or
the same folder at the repository root in a source checkout or an editable install."""
from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_dir(installed: str, repository: str) -> Path:
    """perfmodel/<installed> when the package was installed with its data, else the
    repository's <repository> folder."""
    path = PACKAGE_DIR / installed
    return path if path.is_dir() else PACKAGE_DIR.parent / repository
