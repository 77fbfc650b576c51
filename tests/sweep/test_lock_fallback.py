"""The folder lock on a file system without ``flock`` (NFS without its lock service, Lustre
mounted without ``-o flock``): ``flock`` raises ENOLCK or EOPNOTSUPP there.

The lock falls back to a POSIX record lock (``lockf``), which still keeps a second sweep
out (checked across two processes, both without ``flock``); a file system that keeps no
lock of either kind is an OSError naming the folder and what to do, never a raw one.

Mutants tried: HEAD before the fallback (flock's raw OSError escapes: the first and last
tests fail), the fallback's refusal not read as SweepLockedError (a PermissionError
escapes: the last fails), every errno of flock taken for a missing lock service (EBADF
falls back: the second fails).
"""

import errno
import fcntl
import subprocess
import sys
import textwrap

import pytest

from kvstats.sweep.store import SweepLockedError, lock_dir

pytestmark = pytest.mark.skipif(not hasattr(fcntl, "lockf"), reason="POSIX only")


def _fails(code):
    def fake(fd, op):
        raise OSError(code, "simulated: " + errno.errorcode[code])
    return fake


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP])
def test_no_locks_at_all_is_a_clear_error_naming_the_folder(tmp_path, monkeypatch, code):
    monkeypatch.setattr(fcntl, "flock", _fails(code))
    monkeypatch.setattr(fcntl, "lockf", _fails(code))
    out = tmp_path / "on_nfs"
    with pytest.raises(OSError) as exc:
        with lock_dir(out):
            pass
    text = str(exc.value)
    assert exc.value.errno == code and not isinstance(exc.value, SweepLockedError)
    assert f"output folder {str(out)!r} is on a file system that keeps no file locks" in text
    assert "choose an --out on a local disk" in text and "-o flock" in text


def test_another_error_of_flock_is_not_taken_for_a_missing_lock_service(tmp_path, monkeypatch):
    monkeypatch.setattr(fcntl, "flock", _fails(errno.EBADF))
    with pytest.raises(OSError) as exc:
        with lock_dir(tmp_path):
            pass
    assert exc.value.errno == errno.EBADF and "simulated" in str(exc.value)


_HOLDER = textwrap.dedent("""
    import errno, fcntl, sys
    def fake(fd, op):
        raise OSError(errno.ENOLCK, "simulated")
    fcntl.flock = fake
    from kvstats.sweep.store import lock_dir
    with lock_dir(sys.argv[1]):
        print("held", flush=True)
        sys.stdin.read()   # until the test closes it
""")


def test_without_flock_a_record_lock_keeps_a_second_sweep_out(tmp_path, monkeypatch):
    """Two processes, neither with flock: while one holds the folder the other is refused
    (SweepLockedError naming the holder); once it ends the folder is free again."""
    monkeypatch.setattr(fcntl, "flock", _fails(errno.ENOLCK))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SweepLockedError, match=rf"in use by another sweep \(pid {holder.pid} on "):
            with lock_dir(tmp_path):
                pass
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0
    with lock_dir(tmp_path), lock_dir(tmp_path):   # free, and re-entrant in one thread
        pass
