"""The error of a memory command run as a function (``hammr memory build | reflect |
insights`` from :mod:`hammr.experiments.runner`): the command line turns it into one line on
stderr and its exit status."""

from __future__ import annotations


class MemoryCommandError(Exception):
    """A memory file cannot be made: ``str(e)`` is the one-line reason, ``code`` the exit
    status the command line gives it (2: bad input or configuration)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


__all__ = ["MemoryCommandError"]
