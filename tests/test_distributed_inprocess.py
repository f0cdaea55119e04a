"""Dask's worker code in this process: ``_run_range`` and the per-process state called directly,
and ``OnDask.map`` on a cluster whose workers are threads of this process (tests/test_distributed
runs worker processes, where coverage does not reach)."""

import io
import json

import pytest

from firewall.evaluation import distributed
from firewall.evaluation.distributed import InProcess, OnDask, _run_range, _state
from firewall.errors import ConversationError
from firewall.inputs import ConversationFiles, count_lines, line_aligned_ranges
from firewall.tokens import token_counter


def conversation(n: int, ident: bool = True) -> str:
    messages = [{"role": "user", "content": f"order #W{2378150 + n} please"}] * (1 + n % 3)
    return json.dumps({"id": f"c{n}", "messages": messages} if ident else {"messages": messages})


@pytest.fixture
def jsonl(tmp_path) -> str:
    """Eight lines: a bad one at line 3, a conversation without an id at line 6, and a last
    line without a final newline."""
    lines = [conversation(n) for n in range(8)]
    lines[2] = '{"id": "cut-short", "messages": [{"role": "user", "content": "INV-'
    lines[5] = conversation(5, ident=False)
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")  # no "\n" after the last line
    return str(path)


class Lengths:
    """(conversation id, turns): what a task returns, per conversation."""

    def __init__(self) -> None:
        self.setups = 0

    def setup(self):
        self.setups += 1
        return "state"

    def __call__(self, state, source, conversation):
        assert state == "state"
        return conversation.id, len(conversation.turns)


class Sum:
    def __init__(self) -> None:
        self.turns = self.conversations = 0

    def add(self, result) -> None:
        self.turns += result[1]
        self.conversations += 1


class Summed(Lengths):
    partial = Sum


def run_range(task, path, start, end, first_line, *, fail_fast=False, digest="d"):
    return _run_range(task, digest, token_counter(), "key", path, path, start, end,
                      first_line, True, fail_fast)


def test_a_range_returns_its_results_in_order_a_bad_line_in_its_place(jsonl):
    items = run_range(Lengths(), jsonl, 0, len(open(jsonl, "rb").read()), 1)
    assert [i if isinstance(i, tuple) else f"bad {i.line}" for i in items] == [
        ("c0", 1), ("c1", 2), "bad 3", ("c3", 1), ("c4", 2), ("in/6", 3), ("c6", 1), ("c7", 2)]
    (error,) = [i for i in items if isinstance(i, ConversationError)]
    assert str(error).startswith(f"{jsonl}:3: ")


def test_fail_fast_ends_the_range_at_its_first_bad_line(jsonl):
    items = run_range(Lengths(), jsonl, 0, 10**6, 1, fail_fast=True)
    assert [i if isinstance(i, tuple) else "bad" for i in items] == [("c0", 1), ("c1", 2), "bad"]


def test_partials_are_summed_between_bad_lines(jsonl):
    items = run_range(Summed(), jsonl, 0, 10**6, 1)
    assert [(i.conversations, i.turns) if isinstance(i, Sum) else "bad" for i in items] == [
        (2, 3), "bad", (5, 9)]


def test_ranges_numbered_from_their_first_line_read_what_the_whole_file_reads(jsonl):
    whole = run_range(Lengths(), jsonl, 0, 10**6, 1)
    pieces, first = [], 1
    for start, end in line_aligned_ranges(jsonl, 100):
        pieces += run_range(Lengths(), jsonl, start, end, first)
        first += count_lines(jsonl, start, end)
    assert len(line_aligned_ranges(jsonl, 100)) > 3
    assert [str(i) if isinstance(i, ConversationError) else i for i in pieces] == \
        [str(i) if isinstance(i, ConversationError) else i for i in whole]
    assert pieces[-1] == ("c7", 2)  # the unterminated last line, in the last range


def test_the_state_is_built_once_per_task_and_the_least_recently_used_goes(monkeypatch):
    monkeypatch.setattr(distributed, "_STATES", type(distributed._STATES)())
    kept = distributed._STATES_KEPT
    tasks = [Lengths() for _ in range(kept + 1)]
    for i, task in enumerate(tasks[:kept]):
        _state(task, f"d{i}")
        _state(task, f"d{i}")
    assert [t.setups for t in tasks[:kept]] == [1] * kept
    _state(tasks[0], "d0")  # used again: now the most recent
    _state(tasks[kept], f"d{kept}")  # one more than kept: d1, the least recently used, goes
    assert list(distributed._STATES) == [f"d{i}" for i in range(2, kept)] + ["d0", f"d{kept}"]
    _state(tasks[1], "d1")
    assert tasks[1].setups == 2 and tasks[0].setups == 1  # rebuilt once it had gone


@pytest.fixture(scope="module")
def threads():
    """A Dask cluster whose worker is threads of this process."""
    distributed_ = pytest.importorskip("dask.distributed",
                                       reason="the Dask tests need the dask extra")
    with distributed_.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                   dashboard_address=":0") as local:
        yield local.scheduler_address


def test_on_dask_maps_like_one_process(threads, jsonl, tmp_path):
    other = tmp_path / "one.json"
    other.write_text(json.dumps([{"role": "user", "content": "hi"}]), encoding="utf-8")
    paths = [jsonl, str(other), jsonl]
    for task in (Lengths(), Summed()):
        here_notes, there_notes = io.StringIO(), io.StringIO()
        with InProcess() as mapper:
            files = ConversationFiles(paths, stream=here_notes, progress=False)
            here = [(s, r if isinstance(r, tuple) else (r.conversations, r.turns))
                    for s, r in mapper.map(task, files)]
        before = set(distributed._STATES)
        with OnDask(threads, partition_bytes=120) as mapper:
            files = ConversationFiles(paths, stream=there_notes, progress=False)
            assert len(mapper._ranges(paths)) > 4  # the JSONL file is spread over ranges
            there = [(s, r if isinstance(r, tuple) else (r.conversations, r.turns))
                     for s, r in mapper.map(task, files)]
        # the workers ran in this process (where coverage measures them): their state is here
        assert [distributed._STATES[d] for d in set(distributed._STATES) - before] == ["state"]
        if isinstance(task, Summed):  # summed per run of conversations: compare the totals
            here = [sum(t for _, (_, t) in here)]
            there = [sum(t for _, (_, t) in there)]
        assert there == here and there_notes.getvalue() == here_notes.getvalue()
        assert here_notes.getvalue().count(":3: ") == 2  # the bad line, once per reading


def test_on_dask_fail_fast_raises_the_first_bad_line(threads, jsonl):
    with OnDask(threads, partition_bytes=120) as mapper:
        files = ConversationFiles([jsonl], fail_fast=True, progress=False)
        got = []
        with pytest.raises(ConversationError, match=r":3: "):
            for _, result in mapper.map(Lengths(), files):
                got.append(result)
    assert got == [("c0", 1), ("c1", 2)]


def test_on_dask_raises_an_unreadable_file_at_its_turn(threads, jsonl, tmp_path):
    missing = str(tmp_path / "missing.jsonl")
    with OnDask(threads, partition_bytes=120) as mapper:
        files = ConversationFiles([jsonl, missing], progress=False, stream=io.StringIO())
        got = []
        with pytest.raises(ConversationError, match="missing.jsonl"):
            for _, result in mapper.map(Lengths(), files):
                got.append(result)
    assert len(got) == 7  # every conversation of the first file came first


def test_a_range_ends_at_the_first_line_start_at_or_after_its_size(tmp_path):
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b"123456789\n" * 5)  # 50 bytes, a line start every 10
    assert line_aligned_ranges(path, 20) == [(0, 20), (20, 40), (40, 50)]
    assert line_aligned_ranges(path, 21) == [(0, 30), (30, 50)]
    assert line_aligned_ranges(path, 50) == [(0, 50)]
    assert line_aligned_ranges(path, 1) == [(i, i + 10) for i in range(0, 50, 10)]
    with pytest.raises(ValueError, match="a byte range needs 1 byte or more, got 0"):
        line_aligned_ranges(path, 0)


def test_the_default_range_is_a_quarter_of_a_workers_share_within_its_bounds(threads,
                                                                          tmp_path):
    from firewall.evaluation.distributed import MAX_PARTITION, MIN_PARTITION, RANGES_PER_WORKER

    def sparse(name, size):  # a file of that size that takes no disk
        path = tmp_path / name
        with open(path, "wb") as handle:
            handle.truncate(size)
        return str(path)

    with OnDask(threads) as mapper:
        workers = len(mapper.client.scheduler_info()["workers"])
        assert workers == 1 and RANGES_PER_WORKER == 4
        assert mapper._default_size([sparse("small", 1000)]) == MIN_PARTITION
        assert mapper._default_size([sparse("a", 40 << 20), sparse("b", 8 << 20)]) == 12 << 20
        assert mapper._default_size([sparse("huge", 1 << 30)]) == MAX_PARTITION
