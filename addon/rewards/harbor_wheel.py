"""The product's wheel, written from the installed package itself, for `export harbor` to put beside
the tasks: a Harbor environment installs webarena-live from that file, with no package index holding
webarena-live (its dependencies still come from the image's index).

The wheel is what Python imports now: every file of the `webarena_live` package and of its
`webarena_live.evaluator` sub-package (followed through the links a development install makes), the
installed distribution's METADATA and entry points, and a RECORD with each file's hash (the wheel
format, PEP 427). So a checkout, an editable install and an installed wheel all export the same code
they run.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import zipfile
from pathlib import Path

import webarena_live
import webarena_live.evaluator as evaluator

DISTRIBUTION = "webarena-live"
_SKIPPED_DIRS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def wheel_name() -> str:
    return f"webarena_live-{evaluator.__version__}-py3-none-any.whl"


def _package_files() -> dict[str, Path]:
    """Archive name -> file, for the package and the evaluator (wherever each is on disk)."""
    found: dict[str, Path] = {}
    roots = ((Path(webarena_live.__file__).parent, "webarena_live"),
             (Path(evaluator.__file__).parent, "webarena_live/evaluator"))  # fmt: skip
    for root, prefix in roots:
        for path in sorted(root.rglob("*")):
            relative = path.relative_to(root)
            if set(relative.parts) & _SKIPPED_DIRS or path.suffix in _SKIPPED_SUFFIXES or not path.is_file():
                continue
            found.setdefault(f"{prefix}/{relative.as_posix()}", path.resolve())
    return found


def _hashed(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest},{len(data)}"


def _metadata(distribution: importlib.metadata.Distribution) -> str:
    """The core metadata: an installed wheel's METADATA, or a checkout's PKG-INFO (egg-info keeps the
    requirements in requires.txt: they are added as `Requires-Dist`, so pip installs them)."""
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO") or ""
    if "\nRequires-Dist:" in text or not distribution.requires:
        return text
    head, blank, body = text.partition("\n\n")
    required = "".join(f"\nRequires-Dist: {requirement}" for requirement in distribution.requires)
    return f"{head}{required}{blank}{body}"


def write_wheel(folder: Path) -> Path:
    """Write the product's wheel into `folder` (replacing one of the same name): its path."""
    distribution = importlib.metadata.distribution(DISTRIBUTION)
    info = f"webarena_live-{evaluator.__version__}.dist-info"
    members: dict[str, bytes] = {name: path.read_bytes() for name, path in _package_files().items()}
    members[f"{info}/METADATA"] = _metadata(distribution).encode()
    members[f"{info}/entry_points.txt"] = (distribution.read_text("entry_points.txt") or "").encode()
    members[f"{info}/WHEEL"] = (
        b"Wheel-Version: 1.0\nGenerator: webarena-live export\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    record = [f"{name},{_hashed(data)}" for name, data in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / wheel_name()
    partial = target.with_suffix(".part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    partial.replace(target)  # a reader never sees half a wheel
    return target
