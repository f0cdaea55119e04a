"""Batch commands on Dask give the single-process output byte for byte (a real LocalCluster of
two worker processes, one per module); byte ranges read like the whole file; no Dask needed to
import the library."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from firewall.cli import main
from firewall.formats import read_conversations, read_jsonl_range
from firewall.inputs import count_lines, line_aligned_ranges

FIXTURES = Path(__file__).parent / "fixtures"
SUGGEST = FIXTURES / "suggest"
PARTITION = "2k"  # small enough that the fixture files split into several ranges


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> list[str]:
    """Several files: a JSONL of many ranges holding a bad line and a conversation without an
    id (named by its line in the whole file), a JSON document (one range), another JSONL."""
    lines = (SUGGEST / "support.jsonl").read_text("utf-8").splitlines()
    lines += (SUGGEST / "coding.jsonl").read_text("utf-8").splitlines()
    lines.insert(2, '{"id": "cut-short", "messages": [{"role": "user", "content": "INV-')
    lines.append("")  # a blank line is counted, not read
    lines += (FIXTURES / "conversations" / "native.jsonl").read_text("utf-8").splitlines()
    lines.append(json.dumps([{"role": "user", "content": "order #W2378156 please"},
                             {"role": "assistant", "content": "checking",
                              "tool_calls": [{"name": "get_order",
                                              "arguments": {"order_id": "#W2378156"}}]},
                             {"role": "tool", "name": "get_order", "content": "found"}]))
    big = tmp_path_factory.mktemp("inputs") / "big.jsonl"
    big.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(big), str(FIXTURES / "conversations" / "anthropic.json"),
            str(SUGGEST / "support.jsonl")]


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip(
        "dask.distributed", reason="the Dask tests need the dask extra: "
                                   "pip install -e '.[test,dask]'")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as local:
        yield local.scheduler_address


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def both(capsys, cluster, *argv):
    """(single process, Dask) runs of one command: exit code, stdout, stderr."""
    return (run(capsys, *argv),
            run(capsys, *argv, "--dask", cluster, "--dask-partition", PARTITION))


def test_the_big_input_spreads_over_several_ranges(inputs):
    assert len(line_aligned_ranges(inputs[0], 2048)) >= 4


def test_byte_ranges_read_exactly_what_the_whole_file_reads(inputs):
    errors: list[str] = []
    whole = [(c.id, len(c.turns)) for c in read_conversations(
        inputs[0], on_error=lambda e: errors.append(str(e)))]
    pieces, piece_errors, first = [], [], 1
    for start, end in line_aligned_ranges(inputs[0], 700):
        pieces += [(c.id, len(c.turns)) for c in read_jsonl_range(
            inputs[0], start, end, first_line=first,
            on_error=lambda e: piece_errors.append(str(e)))]
        first += count_lines(inputs[0], start, end)
    assert pieces == whole and piece_errors == errors
    assert len(errors) == 1 and errors[0].startswith(f"{inputs[0]}:3: ")
    assert whole[-1][0] == f"big/{first - 1}"  # the id-less one, named by its line


@pytest.fixture(scope="module")
def unterminated(tmp_path_factory) -> str:
    """A JSONL file whose last line has no final newline and no id (it is named by its line),
    holding a literal no other line holds."""
    lines = (SUGGEST / "support.jsonl").read_text("utf-8").splitlines() * 3
    lines.append(json.dumps({"messages": [{"role": "user", "content": "refund order #W7777123"}]}))
    path = tmp_path_factory.mktemp("unterminated") / "tail.jsonl"
    path.write_text("\n".join(lines), encoding="utf-8")  # no "\n" after the last line
    return str(path)


@pytest.mark.parametrize("size", [1, 700, 2048, 1 << 20])
def test_the_last_line_without_a_final_newline_is_read_in_every_split(unterminated, size):
    ranges = line_aligned_ranges(unterminated, size)
    assert ranges[-1][1] == Path(unterminated).stat().st_size  # the last range reaches the end
    ids, first = [], 1
    for start, end in ranges:
        ids += [c.id for c in read_jsonl_range(unterminated, start, end, first_line=first)]
        first += count_lines(unterminated, start, end)
    assert ids == [c.id for c in read_conversations(unterminated)]
    assert len(ids) == 7 and ids[-1] == "tail/7"  # the unterminated line, named by its number


def test_dask_reads_the_last_line_of_a_file_without_a_final_newline(capsys, cluster,
                                                                     unterminated):
    single, spread = both(capsys, cluster, "scan", unterminated, "--json")
    assert spread == single
    assert "#W7777123" in single[1] and '"tail/7"' in single[1]


def test_eval_tables_and_ledgers_are_identical(capsys, cluster, inputs, tmp_path):
    one, dask = tmp_path / "one.jsonl", tmp_path / "dask.jsonl"
    files = [inputs[0], *inputs]  # the same file twice: its lines are numbered anew
    single = run(capsys, "eval", *files, "--ledgers", str(one))
    spread = run(capsys, "eval", *files, "--ledgers", str(dask), "--dask", cluster,
                 "--dask-partition", PARTITION)
    assert spread == single
    assert single[0] == 1 and "big.jsonl:3" in single[2]  # the bad line, reported once
    assert one.read_bytes() == dask.read_bytes() and one.stat().st_size > 0
    assert run(capsys, "eval", *inputs, "--json", "--dask", cluster, "--dask-partition",
               PARTITION) == run(capsys, "eval", *inputs, "--json")


@pytest.mark.parametrize("mode", [(), ("--json",)], ids=["table", "json"])
def test_scan_output_is_identical(capsys, cluster, inputs, mode):
    single, spread = both(capsys, cluster, "scan", inputs[0], *mode)
    assert spread == single and "#W2378156" in single[1]


def test_replay_tables_json_and_contexts_are_identical(capsys, cluster, inputs, tmp_path):
    one, dask = tmp_path / "one.jsonl", tmp_path / "dask.jsonl"
    args = ("replay", *inputs, "--window", "300", "--keep-last", "2")
    single = run(capsys, *args, "--contexts", str(one))
    spread = run(capsys, *args, "--contexts", str(dask), "--dask", cluster,
                 "--dask-partition", PARTITION)
    assert spread == single and single[0] == 1  # the bad line, reported once
    assert one.read_bytes() == dask.read_bytes()
    assert len(one.read_text("utf-8").splitlines()) >= 3  # several compactions compared
    single, spread = both(capsys, cluster, *args, "--json")
    assert spread == single and '"compactions":[{' in single[1]


def test_a_relative_path_is_read_and_named_as_written(capsys, cluster, inputs, monkeypatch):
    # the workers keep the folder they started in: they must open the file by its full path
    monkeypatch.chdir(Path(inputs[0]).parent)
    single, spread = both(capsys, cluster, "scan", "big.jsonl", "--json")
    assert spread == single and "firewall: skipped big.jsonl:3: " in single[2]


def test_fail_fast_stops_at_the_same_line_with_the_same_output(capsys, cluster, inputs,
                                                               tmp_path):
    single, spread = both(capsys, cluster, "scan", inputs[0], "--json", "--fail-fast")
    assert spread == single and single[0] == 2 and "big.jsonl:3" in single[2]
    one, dask = tmp_path / "one.jsonl", tmp_path / "dask.jsonl"  # the lines before it, kept
    single = run(capsys, "eval", *inputs, "--ledgers", str(one), "--fail-fast")
    spread = run(capsys, "eval", *inputs, "--ledgers", str(dask), "--fail-fast", "--dask",
                 cluster, "--dask-partition", PARTITION)
    assert spread == single and single[0] == 2
    assert one.read_bytes() == dask.read_bytes() and one.stat().st_size > 0


def test_suggest_proposes_the_same_pack(capsys, cluster, inputs, tmp_path):
    files = [str(SUGGEST / "support.jsonl"), inputs[0]]
    single, spread = both(capsys, cluster, "rules", "suggest", *files)
    assert spread == single and "load-bearing literal use(s)" in single[2]


class _Probe:
    """A task whose state says which setup built it."""

    def setup(self):
        import os
        import uuid

        return os.getpid(), uuid.uuid4().hex

    def __call__(self, state, source, conversation):
        return state


def test_the_state_is_built_once_per_worker_not_once_per_range(cluster, inputs):
    import cloudpickle

    from firewall.evaluation.distributed import open_mapper

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import tests
    try:
        with open_mapper(cluster, 700) as mapper, mapper.files(inputs[:1]) as files:
            states = [state for _, state in mapper.map(_Probe(), files)]
    finally:
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert len(line_aligned_ranges(inputs[0], 700)) >= 5  # more ranges than workers
    built = dict(states)  # pid -> the one state it built
    assert len(set(states)) == len(built) <= 2


def test_without_dask_the_library_imports_and_says_which_extra(capsys, monkeypatch, inputs):
    code = ("import sys; import firewall, firewall.evaluation.distributed, firewall.cli, firewall.evaluation.evaluate, "
            "firewall.authoring.suggest; assert not any(m.split('.')[0] in ('dask', 'distributed') "
            "for m in sys.modules), sorted(m for m in sys.modules if 'dask' in m)")
    subprocess.run([sys.executable, "-c", code], check=True)
    monkeypatch.setitem(sys.modules, "dask", None)  # as if the extra were not installed
    code, _, err = run(capsys, "scan", inputs[0], "--dask")
    assert code == 2 and "pip install 'literal-firewall[dask]'" in err


# ── the client's token counter, on every worker ──────────────────────────────────────────

def _count_tokens_api():
    """Anthropic's count-tokens endpoint on 127.0.0.1: a token per word, 7 of framing; the
    texts it was asked to count are in ``.texts``."""
    from loopback import QuietHandler

    class CountTokens(QuietHandler):
        texts: list[str] = []

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            text = body["messages"][0]["content"]
            self.texts.append(text)
            data = json.dumps({"input_tokens": len(text.split()) + 7}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return CountTokens


@pytest.fixture
def anthropic_api(monkeypatch):
    pytest.importorskip("anthropic")
    from loopback import serving

    from firewall.tokens import estimate_tokens, set_token_counter

    api = _count_tokens_api()
    with serving(api) as url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
        try:
            yield api
        finally:  # `--tokens anthropic` installed its counter in this process
            set_token_counter(estimate_tokens)


def test_the_anthropic_counter_pickles_without_calling_the_api(anthropic_api):
    import pickle

    from firewall.tokens import anthropic_counter, counter_named, estimate_tokens

    counter = counter_named("anthropic", "alpha beta gamma delta epsilon")
    remote = anthropic_counter("claude-test")
    assert counter is not estimate_tokens and len(anthropic_api.texts) == 3  # 2 framings, 1 sample
    copies = pickle.loads(pickle.dumps([counter, remote]))  # what Dask sends a worker
    assert len(anthropic_api.texts) == 3  # pickling and unpickling called nothing
    text = "one two three four five six"
    assert copies[0](text) == counter(text) > 0 and len(anthropic_api.texts) == 3
    assert copies[1].framing == remote.framing == 7


def test_replay_with_the_anthropic_counter_runs_on_dask(capsys, cluster, inputs, anthropic_api):
    args = ("replay", *inputs[1:], "--window", "300", "--keep-last", "2", "--tokens",
            "anthropic")
    single, spread = both(capsys, cluster, *args)
    assert spread == single and single[0] == 0 and "compaction(s)" in single[1]
    # each run calibrated once (framing and sample) in this process; no worker called the API
    assert len(anthropic_api.texts) == 4


def test_dask_address_must_look_like_one(capsys, inputs):
    with pytest.raises(SystemExit):
        main(["scan", "--dask", inputs[0]])
    assert "--dask after the input files" in capsys.readouterr().err
