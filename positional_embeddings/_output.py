"""Where the command lines' output goes: files that can be written, and
standard output that the reader closed or the system cannot take."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

__all__ = ["abandon_output", "exit_with", "unwritable"]


def unwritable(path: Path) -> str | None:
    """Why the file ``path`` cannot be written, its missing folders created
    (a directory; a file that is not writable; a folder on the way that is a
    file, or one that cannot be written into), or None.  Checked before a
    command's work, not after minutes of it."""
    if path.is_dir():
        return "is a directory"
    if path.exists():
        return None if os.access(path, os.W_OK) else "is not writable"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"{folder} is not a directory"
    return None if os.access(folder, os.W_OK | os.X_OK) else f"cannot create files in {folder}"


def exit_with(main: Callable[[], int], command: str) -> NoReturn:
    """Exit with ``main()``'s status, or with ``abandon_output``'s where an
    ``OSError`` reaches here: no traceback."""
    try:
        status = main()
        sys.stdout.flush()
    except OSError as error:
        status = abandon_output(error, command)
    sys.exit(status)


def abandon_output(error: OSError, command: str) -> int:
    """The exit status of a command stopped by ``error``, 1.  Output the
    reader closed (``... | head``) ends it with nothing more; any other
    ``OSError`` (standard output on a full disk, say) with one line on
    stderr, naming ``command``.  Standard output is pointed at the null
    device, so that the interpreter's own flush at exit does not fail
    again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if not isinstance(error, BrokenPipeError):
        print(f"{command}: error: {error}", file=sys.stderr)
    return 1
