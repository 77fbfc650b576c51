"""The exclusive file lock kvstats takes on its folders, without waiting.

One rule for every lock on a folder kvstats writes into: a sweep's output folder
(:func:`kvstats.sweep.folder.lock_dir`) and each staging folder of a report
(:mod:`kvstats.report.folder`). :func:`try_lock` takes ``flock``, else a POSIX record lock
(``lockf``) where the file system keeps no ``flock`` locks (NFS without its lock service,
Lustre mounted without ``-o flock``, some FUSE mounts). The fallback keeps the rule
because every kvstats process on such a file system takes the same fallback, and Linux
serves ``flock`` on NFS with these very record locks; like ``flock``'s, the kernel drops
it when the process dies, even by ``kill -9``. What a caller does when the lock is held,
or when the file system keeps no lock at all, is its own (a sweep refuses; a report keeps
a staging folder it cannot tell abandoned).

Internal: shared by the sweep and the report, not user API (standard library only).
"""

from __future__ import annotations

import errno
import os
from typing import Any

try:
    import fcntl
except ImportError:   # pragma: no cover - not on POSIX: no locks
    fcntl = None  # type: ignore[assignment]

__all__ = ["try_lock", "NoFileLocksError"]

# errno values of a file system that keeps no locks of the kind asked for
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})


class NoFileLocksError(OSError):
    """The file system keeps neither ``flock`` nor POSIX record locks.

    ``errno`` is the record lock's; ``strerror`` names both refusals
    (``"flock: ...; fcntl record lock: ..."``).
    """


def try_lock(fh: Any) -> bool:
    """Take the exclusive lock of the open file ``fh`` without waiting.

    ``flock``, else, where the file system keeps no ``flock`` locks (``ENOLCK``,
    ``EOPNOTSUPP``, ``ENOTSUP`` or ``ENOSYS``), a POSIX record lock (``lockf``; ``fh``
    must be open for writing). A record lock belongs to the process, not to the open
    file: no fork inherits it, and closing any descriptor of the file in this process
    drops it, so while a caller holds the lock it opens no second descriptor of the file.

    Parameters
    ----------
    fh : file object
        The open lock file (its ``fileno()`` is locked).

    Returns
    -------
    bool
        True: this open file holds the lock until it is closed (also where there are no
        locks to take: not on POSIX). False: another process (or, under ``flock``,
        another open file of this process) holds it.

    Raises
    ------
    NoFileLocksError
        The file system keeps neither kind of lock.
    OSError
        Any other error of ``flock`` or ``lockf``, unchanged.

    Examples
    --------
    >>> import tempfile
    >>> path = tempfile.mkstemp()[1]
    >>> with open(path, "a+") as first, open(path, "a+") as second:
    ...     try_lock(first), try_lock(second)
    (True, False)
    """
    if fcntl is None:   # pragma: no cover - not on POSIX
        return True
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LOCKS:
            raise
        no_flock = exc.errno
    try:
        fcntl.lockf(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            return False
        if exc.errno not in _NO_LOCKS:
            raise
        raise NoFileLocksError(exc.errno, f"flock: {os.strerror(no_flock)}; fcntl record lock: "
                                          f"{os.strerror(exc.errno)}") from None
