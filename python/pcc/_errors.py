"""pcc's exceptions: one class per kind of failure, each carrying the one-line
message the command-line tools print (docs/python.md#errors)."""

__all__ = [
    "Error", "BadInputError", "UnsupportedError", "CheckError", "PeerError", "OutOfMemoryError", "InternalError",
]


class Error(Exception):
    """Every failure pcc reports. `exit_code` is what the tools exit with."""

    exit_code = 1


class BadInputError(Error, ValueError):
    """A bad model, plan, tensor, option or feed (the tools' exit code 2)."""

    exit_code = 2


class UnsupportedError(BadInputError):
    """A valid input pcc cannot handle yet (exit code 2)."""


class CheckError(Error):
    """A numeric check found a mismatch (exit code 1)."""

    exit_code = 1


class PeerError(Error):
    """The machine failed the run: a peer rank that never arrives, dies or
    stops answering, or a run interrupted (exit code 4)."""

    exit_code = 4


class OutOfMemoryError(PeerError, MemoryError):
    """A rank or the compiler ran out of memory (exit code 4)."""


class InternalError(Error):
    """A bug in pcc (exit code 3): please report it with the message."""

    exit_code = 3


# The codes of runtime/support/status.h (StatusCode).
_INVALID_INPUT, _UNSUPPORTED, _CHECK_FAILED, _INTERNAL, _ENVIRONMENT = 1, 2, 3, 4, 5


def error_class(code, message):
    """\\returns the exception class for a StatusCode and its message (the
    compiled module raises what this picks)."""
    if code == _INVALID_INPUT:
        return BadInputError
    if code == _UNSUPPORTED:
        return UnsupportedError
    if code == _CHECK_FAILED:
        return CheckError
    if code == _ENVIRONMENT:
        return OutOfMemoryError if "out of memory" in message else PeerError
    return InternalError
