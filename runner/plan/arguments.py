"""The command line's words themselves, checked before they are parsed."""

from __future__ import annotations

import os
from typing import Sequence

from runner.plan.matrix import shown_value


def undecodable_argument(argv: Sequence[str]) -> str | None:
    """A message naming the first argument that is not valid UTF-8, or None.

    Python hands such bytes over as lone surrogates; a value holding them cannot be written
    into a results line (UTF-8 JSON) or a path the line names, so the sweep would run and
    then lose its line. It is refused before anything runs."""
    for position, argument in enumerate(argv, 1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            shown = shown_value(ascii(os.fsencode(argument))[2:-1])
            return (f"argument {position} ({shown}) is not valid UTF-8; results lines and "
                    "their folders are UTF-8")
    return None
