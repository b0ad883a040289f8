"""The benchmarks' workload cache gives the workload it would build, and only for its corpus."""

from __future__ import annotations

import gzip
import itertools
import pickle
from pathlib import Path

from bench._corpus import DEFAULT_CORPUS, MINI_SWE, TAU_BENCH
from bench.bench_engine import build_workload
from bench.bench_layers import load_workload


def _small_corpus(folder: Path, lines: int) -> Path:
    """The first ``lines`` rows of each file of the shipped corpus."""
    folder.mkdir()
    for name in (MINI_SWE, TAU_BENCH):
        with gzip.open(DEFAULT_CORPUS / name, "rt", encoding="utf-8") as source:
            head = list(itertools.islice(source, lines))
        with gzip.open(folder / name, "wt", encoding="utf-8") as target:
            target.writelines(head)
    return folder


def test_cached_workload_is_the_built_one(tmp_path: Path) -> None:
    corpus = _small_corpus(tmp_path / "corpus", 40)
    cache = tmp_path / "workload.pickle"
    built = build_workload(corpus, 10**9)
    assert load_workload(corpus, 10**9, cache) == built
    with cache.open("rb") as file:
        key, kept = pickle.load(file)
    assert kept == built
    with cache.open("wb") as file:  # a marked copy: only a read of the cache can return it
        pickle.dump((key, built[:3]), file)
    moved = tmp_path / "moved"
    corpus.rename(moved)  # the same files elsewhere: the cache is still theirs
    assert load_workload(moved, 10**9, cache) == built[:3]
    assert load_workload(moved, 2, cache) == built[:2]


def test_cache_of_another_corpus_is_rebuilt(tmp_path: Path) -> None:
    cache = tmp_path / "workload.pickle"
    first = _small_corpus(tmp_path / "first", 20)
    second = _small_corpus(tmp_path / "second", 60)
    of_first = load_workload(first, 10**9, cache)
    of_second = load_workload(second, 10**9, cache)  # not the first corpus's, from the cache
    assert len(of_second) > len(of_first)
    assert load_workload(second, 10**9, cache) == of_second


def test_unreadable_cache_is_built_again(tmp_path: Path) -> None:
    corpus = _small_corpus(tmp_path / "corpus", 20)
    cache = tmp_path / "workload.pickle"
    built = build_workload(corpus, 10**9)
    cache.write_bytes(pickle.dumps(("key", built))[:50])  # cut short, as by a stopped write
    assert load_workload(corpus, 10**9, cache) == built
    with cache.open("rb") as file:
        _key, kept = pickle.load(file)  # replaced by a whole cache
    assert kept == built
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["workload.pickle"]
