"""How every script writes a file the user named (--json, --plot, --update,
report files) and checks a directory it will fill (--out): the rule the
runner keeps in C++ (runner/io/output_path.h; docs/RESULTS.md, Guarantees).

- a regular file, or a path that does not exist yet: replaced atomically
  (a fresh PATH.<hex>.tmp created with O_EXCL|O_NOFOLLOW, fsync, os.replace),
  so a reader never sees half a file and no planted link is followed;
- "-", a character device, a FIFO, or a symlink to anything but a directory
  (/dev/stdout -> /proc/self/fd/1): written in place, as a stream, so a
  device stays a device and a link stays a link;
- a directory, a block device, a socket, a symlink loop or a dangling
  symlink, a missing or unwritable parent: refused (OutputPathError).

Scripts call check_output_path() (or exit_if_unwritable()) before their work,
so a bad path fails in a second with exit 2, not after the work with a
traceback.
"""

import errno
import os
import stat
import sys

REPLACE, STREAM, STDOUT = "replace", "stream", "stdout"


class OutputPathError(Exception):
    """A path no output may go to; the message names it and why."""


def _refuse(path, why):
    raise OutputPathError(f"cannot write {path}: {why}")


def _check_parent(path):
    parent = os.path.dirname(path) or "."
    if not os.path.exists(parent):
        _refuse(path, f"its directory {parent} does not exist")
    if not os.path.isdir(parent):
        _refuse(path, f"{parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        _refuse(path, f"its directory {parent} is not writable")


def _stream_or_refuse(path, mode, through_link):
    if stat.S_ISDIR(mode):
        _refuse(path, "it is a symlink to a directory" if through_link else "it is a directory")
    if stat.S_ISBLK(mode):
        _refuse(path, "it is a block device (a disk is never an output)")
    if stat.S_ISSOCK(mode):
        _refuse(path, "it is a socket")
    if not os.access(path, os.W_OK):
        _refuse(path, "permission denied")
    return STREAM


def check_output_path(path):
    """REPLACE, STREAM or STDOUT for `path`; raises OutputPathError. Only
    stats: opening a FIFO would block until a reader comes."""
    path = os.fspath(path)
    if path == "-":
        return STDOUT
    if not path:
        _refuse("''", "the path is empty")
    try:
        own = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        _check_parent(path)  # says which: a missing directory, or a file where one should be
        return REPLACE
    except OSError as e:
        _refuse(path, e.strerror)
    if stat.S_ISREG(own.st_mode):
        _check_parent(path)  # the rename needs the directory, not only the file
        return REPLACE
    if not stat.S_ISLNK(own.st_mode):
        return _stream_or_refuse(path, own.st_mode, False)
    # A symlink is written through, never replaced: renaming over /dev/stdout
    # would leave a regular file that nobody reads.
    try:
        target = os.stat(path)
    except OSError as e:
        if e.errno == errno.ELOOP:
            _refuse(path, "a symlink loop (ELOOP: too many levels of symbolic links)")
        if e.errno == errno.ENOENT:
            _refuse(path, "a symlink to a file that does not exist")
        _refuse(path, e.strerror)
    return _stream_or_refuse(path, target.st_mode, True)


def write_output(path, data):
    """Writes `data` (str: UTF-8, or bytes) to `path` by the rule above."""
    path = os.fspath(path)
    mode = check_output_path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    if mode == STDOUT:
        sys.stdout.flush()  # what print() buffered goes first
        sys.stdout.buffer.write(payload)
        sys.stdout.buffer.flush()
        return
    if mode == STREAM:
        sys.stdout.flush()  # /dev/stdout may be our own standard output
        # No O_CREAT: nothing new appears beside a device. A symlink to a
        # regular file gets the new content in place (truncated first).
        fd = os.open(path, os.O_WRONLY | os.O_NOCTTY)
        with os.fdopen(fd, "wb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                f.truncate(0)
            f.write(payload)
        return
    fd, tmp = _create_temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())  # after a crash the new name never points at missing data
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def _create_temp_beside(path):
    """(fd, name) of a new temp file beside `path`, created exclusively and
    never through a link (O_CREAT|O_EXCL|O_NOFOLLOW), so a symlink planted at
    PATH.tmp is never opened and the write cannot reach a file we did not
    create (issue 43, item 1). Named "<base>.<8 hex>.tmp" like the runner's
    (runner/io/atomic_file.cpp): base cut to 200 bytes, under NAME_MAX."""
    directory, base = os.path.split(path)
    base = os.fsencode(base)[:200].decode("utf-8", "surrogateescape")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = os.path.join(directory, f"{base}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o644), tmp
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, f"no free temporary name beside {path} in 100 tries")


def check_output_dir(path):
    """For an --out DIR a script fills: an existing directory, or a new one
    whose parent takes it. Raises OutputPathError."""
    path = os.fspath(path)
    if not path:
        _refuse("''", "the path is empty")
    if os.path.isdir(path):
        if not os.access(path, os.W_OK | os.X_OK):
            _refuse(path, "the directory is not writable")
        return
    if os.path.lexists(path):
        _refuse(path, "it exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):  # makedirs creates the missing levels
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        _refuse(path, f"{parent} does not take a new directory")


def exit_if_unwritable(flag, path, directory=False):
    """check_output_path (or check_output_dir) for a command-line flag's
    value; prints 'error: FLAG: ...' and exits 2 when refused."""
    if path is None:
        return
    try:
        check_output_dir(path) if directory else check_output_path(path)
    except OutputPathError as e:
        print(f"error: {flag}: {e}", file=sys.stderr)
        sys.exit(2)
