"""_errors.py: the library's statuses as Python exceptions, each with the library's message."""
from __future__ import annotations

from . import _lib


class OxidizeError(Exception):
    """Base of the errors that carry a liboxidize status."""


class FormatError(OxidizeError, ValueError):
    """A malformed file or text: a bad GGUF file, a grammar or JSON schema that does not parse,
    a chat template that raises."""


class UnsupportedError(OxidizeError, ValueError):
    """Something the library does not run (an architecture, a tensor type)."""


class ContextFullError(OxidizeError, ValueError):
    """More tokens than the context holds."""


class DeviceError(OxidizeError, RuntimeError):
    """The GPU failed."""


class AbortedError(OxidizeError, RuntimeError):
    """An operation cancelled on request."""


class InvalidArgumentError(OxidizeError, ValueError):
    """An argument the library refused (out of range, a bad token id)."""


class LibraryIOError(OxidizeError, OSError):
    """A file the library could not read."""


class LibraryMemoryError(OxidizeError, MemoryError):
    """The library ran out of memory."""


_BY_STATUS = {
    _lib.OX_ERR_IO: LibraryIOError,
    _lib.OX_ERR_FORMAT: FormatError,
    _lib.OX_ERR_UNSUPPORTED: UnsupportedError,
    _lib.OX_ERR_OOM: LibraryMemoryError,
    _lib.OX_ERR_DEVICE: DeviceError,
    _lib.OX_ERR_INVALID_ARG: InvalidArgumentError,
    _lib.OX_ERR_CONTEXT_FULL: ContextFullError,
    _lib.OX_ERR_ABORTED: AbortedError,
}


def check(status: int, what: str = "") -> None:
    """Raise the exception of a failed status, with the library's message."""
    if status == _lib.OX_OK:
        return
    message = (_lib.lib.ox_last_error() or b"").decode("utf-8", errors="replace")
    name = (_lib.lib.ox_status_name(status) or b"OX_UNKNOWN").decode()
    text = f"{what}: {message}" if what else message
    raise _BY_STATUS.get(status, OxidizeError)(text or name)
