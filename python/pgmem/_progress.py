"""A progress bar for bulk ingest: tqdm's when it is installed (the [embed] and [bench]
extras bring it), else a silent stand-in with the same three methods, so that the core
package needs no progress-bar library."""
from __future__ import annotations

from typing import Any


class _Silent:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(*, total: int | None = None, unit: str, desc: str, disable: bool) -> Any:
    """``tqdm(total=..., unit=..., desc=..., disable=...)``, or a silent bar without tqdm."""
    if disable:
        return _Silent()
    try:
        from tqdm import tqdm
    except ImportError:
        return _Silent()
    return tqdm(total=total, unit=unit, desc=desc)
