"""One writer per run folder: an operating-system lock held while a command writes there.

    with run_lock("out", "gradflow train"):     # a second process meets FolderInUse, naming this one
        ...                                     # train, save, log

The lock is flock(2) on a file, `<folder>/.gradflow-lock` for a run. The kernel releases it when
the process ends, however it ends (SIGKILL included), so a killed run leaves no lock to block the
next one. The file holds the holder's pid and command, so that a refusal can name them, and is
removed when the lock is released; one left by a killed process is unlocked, and simply reused.

Removing the file opens a race: a process that opened it just before it was removed would lock a
file no longer in the folder, while a third creates and locks a new one. So whoever locks checks
that the path still names the file it locked, and starts again if it does not.

The file is opened without following a link and must be a regular file (gradflow/engine/files.py): a
run folder received from someone else may hold `.gradflow-lock` as a link to a file of yours, which
locking would otherwise overwrite; a link, a FIFO or a folder there is refused in one line naming it.

Python on Windows has no fcntl: there folders are not locked, and two runs on one folder are not
stopped.
"""

import os
from pathlib import Path

from gradflow.engine.files import open_regular

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

NAME = ".gradflow-lock"


class FolderInUse(OSError):
    """Another process holds the lock: its message names the folder and the process."""


class FolderLock:
    """The lock kept in the file `path` over `folder` (what the refusal names), by `command`."""

    def __init__(self, path, folder, command):
        self.path, self.folder, self.command = Path(path), Path(folder), command
        self.fd, self.made = None, False

    def acquire(self):
        """Take the lock, or raise FolderInUse at once (never wait: the other run may last for hours)."""
        if fcntl is None:
            return self
        while self.fd is None:
            if not self.path.parent.exists():
                self.path.parent.mkdir(parents=True)
                self.made = True  # removed again on release if nothing else was written there
            try:  # never through a link, never into a FIFO (files.py): a run folder may come from anyone
                fd = open_regular(self.path, "x")
            except FileExistsError:  # left by a killed process, or held now: lock the file that is there
                fd = open_regular(self.path, "w")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _holder(fd)
                os.close(fd)
                raise FolderInUse(f"{self.folder} is in use by {holder}; wait for it to end") from None
            if _names(self.path, fd):
                self.fd = fd
            else:  # its holder removed the file while this process opened it: lock the file there now
                os.close(fd)
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()} {self.command}\n".encode())
        return self

    def release(self):
        """Remove the file, then let the lock go (removing it first: see the module's docstring)."""
        if self.fd is None:
            return
        if _names(self.path, self.fd):  # what lies there now is the file locked (nothing else is removed)
            self.path.unlink()
        os.close(self.fd)
        self.fd = None
        if self.made and not any(self.path.parent.iterdir()):
            self.path.parent.rmdir()  # a command refused before it wrote anything leaves no folder behind

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _holder(fd):
    """`process <pid> (<command>)` as the holder wrote it in the lock file open as `fd` (it may not have yet)."""
    pid, _, command = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip().partition(" ")
    return f"process {pid} ({command})" if pid.isdigit() else "another process"


def _names(path, fd):
    """Whether `path` is the file open as `fd`."""
    try:
        here = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    there = os.fstat(fd)
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def run_lock(folder, command):
    """The lock of a run folder, which train and finetune take before they read or write in it."""
    return FolderLock(Path(folder) / NAME, folder, command)
