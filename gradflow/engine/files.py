"""Writing a file so that a crash never leaves a half-written one: write beside it, then rename.

os.replace is atomic on one file system: whoever opens `path` sees the old file whole or the new
one whole, never a mixture. The new bytes are synced to disk before the rename, so a power cut
right after it cannot leave an empty file under the old name. The temporary file is named
`.<name>.<pid>.tmp`; one that a killed process left behind is removed at the next write.
"""

import contextlib
import os
from pathlib import Path


@contextlib.contextmanager
def written_atomically(path):
    """Yield a temporary path beside `path`; once the block has written it, it replaces `path`.

    If the block raises, `path` is untouched and the temporary file is removed.
    """
    path = Path(path)
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _remove_stale_temporaries(path):
    """Delete `.<name>.<pid>.tmp` files that a killed write left beside `path` (their process is gone)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid):
    if pid == os.getpid():
        return False  # ours, from a write of this process that failed: not in use now
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
