"""Writes cache images the way the target does, for tests and fixtures.

    with open("cache.img", "wb") as f:
        f.truncate(64 << 20)
    with wbkit.testing.LogWriter("cache.img") as w:
        w.write(8, b"x" * 4096)
        w.flush()
"""

from ._wbkit.testing import LogWriter

__all__ = ["LogWriter"]
