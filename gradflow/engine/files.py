"""Writing files where someone else may have been first: never through a link, never half-written.

A run folder, an export's destination or an exercise workspace may come from someone else, and may
hold a symbolic link where gradflow writes (`.gradflow-lock -> ~/.bashrc`): opening that name for
writing would write the link's target. So every file gradflow writes is opened here: without
following a link at its last step (O_NOFOLLOW), created exclusively where it is new (O_CREAT |
O_EXCL), and checked to be a regular file (fstat) before a byte is written. A link, a FIFO, a
folder or a device in its place is refused in one line naming it (NotAFile).

Replacing a file (written_atomically, write_atomically) writes a temporary file beside it, syncs it
to disk and renames it over the old one: os.replace is atomic on one file system, so whoever opens
`path` sees the old file whole or the new one whole, and a power cut right after the rename cannot
leave an empty file under the old name. The temporary file is `.<name>.<pid>.tmp`; one that a killed
process left behind is removed at the next write. A failure (a full disk) is one OSError naming the
file and saying that the previous one is unchanged.
"""

import contextlib
import errno
import os
import stat
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # Windows has no symbolic links to follow here
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for its other end
MODES = {  # read and write where writing: an unread FIFO then opens at once, to be refused by fstat
    "r": os.O_RDONLY,
    "w": os.O_RDWR | os.O_CREAT,
    "a": os.O_RDWR | os.O_CREAT | os.O_APPEND,
    "x": os.O_RDWR | os.O_CREAT | os.O_EXCL,
}


class NotAFile(OSError):
    """Something other than a regular file lies where gradflow reads or writes one: the message names it."""


def kind_of(mode):
    """What a file of st_mode `mode` is, in words."""
    kinds = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"))
    kinds += ((stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"))
    return next((said for test, said in kinds if test(mode)), "not a regular file")


def refusal(path, kind):
    """The one-line refusal of `path`, which is `kind` ("a FIFO")."""
    return NotAFile(f"{path} is {kind}, not a regular file; gradflow reads and writes only regular files there")


def open_regular(path, mode="r", follow=False):
    """A file descriptor for the regular file `path`, opened as `mode` says (r, w, a or x: see MODES).

    A symbolic link at `path` is refused unless `follow` (reading a file the user linked is fine;
    writing through a link never is), and so is anything that is not a regular file. "w" does not
    truncate: `opened` truncates once fstat has said the file is a regular one (O_TRUNC would empty
    whatever it opened first).
    """
    flags = MODES[mode] | NONBLOCK | getattr(os, "O_CLOEXEC", 0) | (0 if follow else NOFOLLOW)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK) and not follow:  # EMLINK: what FreeBSD says for O_NOFOLLOW
            raise refusal(path, "a symbolic link") from None
        if e.errno == errno.ENXIO:  # a FIFO no process reads: O_NONBLOCK refuses to wait for one
            raise refusal(path, "a FIFO") from None
        if e.errno == errno.EISDIR:
            raise refusal(path, "a folder") from None
        raise
    mode_of = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode_of):
        os.close(fd)
        raise refusal(path, kind_of(mode_of))
    if NONBLOCK:
        os.set_blocking(fd, True)
    return fd


def opened(path, mode="r", follow=False, encoding="utf-8"):
    """open(path, mode) through open_regular: mode is r, w, a or x, with b for bytes."""
    fd = open_regular(path, mode.replace("b", ""), follow)
    if mode.startswith("w"):
        os.ftruncate(fd, 0)
    return os.fdopen(fd, mode.replace("x", "w"), encoding=None if "b" in mode else encoding)


def check_replaceable(path):
    """Refuse a `path` that exists as anything but a regular file (the link itself is looked at)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise refusal(path, kind_of(mode))


def check_kind(path, beginnings, kind):
    """Refuse, in one line, to replace an existing `path` that does not begin with one of `beginnings`: it is
    not a `kind` (a JUnit report, a PNG picture) but something else given by mistake, and it is kept."""
    if not os.path.lexists(path):
        return
    with opened(path, "rb") as f:  # a link or a FIFO there is refused by name, and not read
        head = f.read(max(map(len, beginnings)) + 64).lstrip()
    if not head.startswith(tuple(beginnings)):
        raise ValueError(f"{path} exists and is not {kind}; it is kept: choose another file")


@contextlib.contextmanager
def written_atomically(path, what=""):
    """Yield a new, empty temporary file's path beside `path`; once the block has written it, it
    replaces `path`. `what` ("checkpoint ") names the file in a failure's message.

    If the block raises, `path` is untouched and the temporary file is removed.
    """
    path = Path(path)
    check_replaceable(path)
    _remove_stale_temporaries(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        tmp.unlink()  # ours, from a write of this process that failed (or a link: unlink never follows one)
    made = False
    try:
        os.close(open_regular(tmp, "x"))  # new, so ours: a writer that needs a path (safetensors) writes here
        made = True
        yield tmp
        fd = open_regular(tmp, "r")  # still a regular file, not a link (a writer may have made it anew)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        check_replaceable(path)
        os.replace(tmp, path)
    except NotAFile:
        raise
    except OSError as e:  # a full disk, say: name the file, and say that what was there is untouched
        kept = "the previous one is unchanged" if path.exists() else "nothing was there before"
        failed = OSError(f"could not write {what}{path} ({e.strerror or e}); {kept}")
        failed.strerror = e.strerror or str(e)  # the reason alone, for a caller that names a folder
        raise failed from None
    finally:
        if made:
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                tmp.unlink()


def write_atomically(path, data, what=""):
    """Replace the file `path` by `data` (str, written as UTF-8, or bytes), atomically (written_atomically)."""
    with written_atomically(path, what) as tmp, opened(tmp, "w" if isinstance(data, str) else "wb") as f:
        f.write(data)


def _remove_stale_temporaries(path):
    """Delete `.<name>.<pid>.tmp` files that a killed write left beside `path` (their process is gone)."""
    for tmp in path.parent.glob(f".{path.name}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 : -len(".tmp")]
        if pid.isdigit() and not alive(int(pid)):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                tmp.unlink()  # a file, or a link (unlink removes the link, never its target); never a folder


def alive(pid):
    """Whether another process of id `pid` is running (this one's own id counts as gone: not in use now)."""
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process (or an id out of range, left alone to be safe)
    return True
