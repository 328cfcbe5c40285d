"""Which process of a distributed job this is: its rank identity, read once from the
environment torchrun (or any launcher following its convention) sets.

Every file an instrumented process writes into a shared folder carries its rank in its name
(`script_profile.rank3.json`, `injection.rank3.json`), so ranks of one job do not overwrite
each other; readers parse the rank back from the name. Both directions live here, beside the
environment reading, so that the launcher, the hooks and the injection agree on one spelling.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

#: The variables torchrun sets in each rank's environment.
RANK_ENV: Final = "RANK"
LOCAL_RANK_ENV: Final = "LOCAL_RANK"
WORLD_SIZE_ENV: Final = "WORLD_SIZE"

#: What precedes the rank in a file name's suffix: `<stem>.rank<N>.<ext>`.
SUFFIX_PREFIX: Final = ".rank"


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    value = environ.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class RankIdentity:
    """A process's place in a distributed job; all None outside one (plain `python`)."""

    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RankIdentity:
        """Read from `environ` (default: this process's); a variable that is missing or not an
        integer reads as None."""
        env = os.environ if environ is None else environ
        return cls(
            rank=_env_int(env, RANK_ENV),
            local_rank=_env_int(env, LOCAL_RANK_ENV),
            world_size=_env_int(env, WORLD_SIZE_ENV),
        )

    @property
    def suffix(self) -> str:
        """`.rank<N>` for a distributed rank, empty otherwise (see `rank_suffix`)."""
        return rank_suffix(self.rank)


def rank_suffix(rank: int | None) -> str:
    """The file-name suffix of `rank`: `.rank<N>`, or empty for a process that has no rank."""
    return f"{SUFFIX_PREFIX}{rank}" if rank is not None and rank >= 0 else ""


def parse_rank_suffix(suffix: str) -> int | None:
    """The rank a suffix written by `rank_suffix` names; None for the empty suffix or text
    that is not one."""
    digits = suffix.removeprefix(SUFFIX_PREFIX)
    if digits == suffix or not digits.isdigit():
        return None
    return int(digits)


def rank_of_file(name: str, stem: str, extension: str) -> int | None:
    """The rank in a file name `<stem>[.rank<N>]<extension>`; None without one."""
    return parse_rank_suffix(name.removeprefix(stem).removesuffix(extension))
