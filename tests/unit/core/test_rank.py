"""Rank identity: read from torchrun's environment, written into file names and read back."""

from __future__ import annotations

import pytest

from torchdoctor.core.rank import (
    RankIdentity,
    parse_rank_suffix,
    rank_of_file,
    rank_suffix,
)


def test_a_torchrun_environment_gives_rank_local_rank_and_world_size() -> None:
    env = {"RANK": "5", "LOCAL_RANK": "1", "WORLD_SIZE": "8", "MASTER_PORT": "29500"}
    assert RankIdentity.from_env(env) == RankIdentity(rank=5, local_rank=1, world_size=8)


def test_plain_python_has_no_rank_and_no_suffix() -> None:
    identity = RankIdentity.from_env({})
    assert identity == RankIdentity(rank=None, local_rank=None, world_size=None)
    assert identity.suffix == ""


def test_a_variable_that_is_not_an_integer_reads_as_absent() -> None:
    identity = RankIdentity.from_env({"RANK": "zero", "LOCAL_RANK": "", "WORLD_SIZE": "2"})
    assert identity == RankIdentity(rank=None, local_rank=None, world_size=2)
    assert identity.suffix == ""


def test_the_process_environment_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert RankIdentity.from_env() == RankIdentity(rank=3, local_rank=3, world_size=None)
    assert RankIdentity.from_env().suffix == ".rank3"


@pytest.mark.parametrize("rank", [0, 1, 7, 12, 1023])
def test_a_suffix_reads_back_as_its_rank(rank: int) -> None:
    suffix = RankIdentity(rank=rank).suffix
    assert suffix == f".rank{rank}"
    assert parse_rank_suffix(suffix) == rank
    assert rank_of_file(f"script_profile{suffix}.json", "script_profile", ".json") == rank


def test_no_rank_has_the_empty_suffix_which_reads_back_as_no_rank() -> None:
    assert rank_suffix(None) == ""
    assert parse_rank_suffix("") is None
    assert rank_of_file("script_profile.json", "script_profile", ".json") is None


@pytest.mark.parametrize("text", [".rank", ".rankx", ".rank-1", "rank3", ".ranks3", ".rank3a"])
def test_text_that_is_not_a_rank_suffix_reads_as_no_rank(text: str) -> None:
    assert parse_rank_suffix(text) is None


def test_the_suffix_is_independent_of_the_stem_and_extension() -> None:
    # injection files and traces carry the same suffix as profiles
    assert rank_of_file("injection.rank2.json", "injection", ".json") == 2
    assert rank_of_file("trace.rank4.json.gz", "trace", ".json.gz") == 4
