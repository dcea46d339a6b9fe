"""``mnemolog eval`` writes its rankings where ``--rankings`` says, by default into the data directory."""

from __future__ import annotations

import json

import pytest

from mnemolog.tools import cli

TURNS = [
    {"id": "t1", "text": "I moved to Lisbon in May", "speaker": "Ana", "session": 1},
    {"id": "t2", "text": "My sister plays the cello", "speaker": "Ana", "session": 1},
]
QUESTIONS = [{"qid": "q1", "query": "Which city did Ana move to?", "gold": ["t1"]}]


def _inputs(tmp_path):
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    corpus.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    return ["--corpus", str(corpus), "--queries", str(queries)]


def test_rankings_go_to_the_data_directory_by_default(tmp_path, monkeypatch, capsys):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert cli.main(["--data-dir", str(tmp_path / "data"), "eval", *_inputs(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("recall@1=")
    written = [json.loads(line) for line in (tmp_path / "data" / "eval-rankings.jsonl").read_text().splitlines()]
    assert [r["qid"] for r in written] == ["q1"] and written[0]["ranking"][0] == "t1"
    assert list(cwd.iterdir()) == []  # nothing left in the working directory


def test_rankings_go_where_asked(tmp_path, capsys):
    target = tmp_path / "out" / "ranks.jsonl"
    target.parent.mkdir()  # a missing folder is refused, never made (tests/tools/test_eval_bad_input.py)
    assert cli.main(["eval", *_inputs(tmp_path), "--rankings", str(target)]) == 0
    assert json.loads(target.read_text().splitlines()[0])["gold"] == ["t1"]



def test_the_temporary_store_is_removed_and_a_work_dir_kept(tmp_path, monkeypatch, capsys):
    """Without ``--work-dir`` each run's store went to a new temporary directory that stayed: runs filled /tmp."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    assert cli.main(["--data-dir", str(tmp_path / "data"), "eval", *_inputs(tmp_path)]) == 0
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "knowledge.json").write_text(json.dumps({"entities": [{"id": "ada", "name": "Ada", "entity_type": "person"}], "relations": [], "memories": [{"id": "m1", "text": "Ada likes tea"}]}))
    (folder / "questions.jsonl").write_text(json.dumps({"qid": "q1", "query": "Ada", "gold": ["ada"]}) + "\n")
    assert cli.main(["eval", "--entities", str(folder)]) == 0
    assert list(scratch.iterdir()) == []
    assert cli.main(["--data-dir", str(tmp_path / "data"), "eval", *_inputs(tmp_path), "--work-dir", str(tmp_path / "work")]) == 0
    assert (tmp_path / "work" / "events.db").is_file()  # asked for: kept, to look at what was stored


# -- the entity set -------------------------------------------------------------------------------------

from mnemolog.tools import entity_evaluation  # noqa: E402


def test_the_shipped_entity_set_is_labelled_against_its_own_graph():
    knowledge, questions = entity_evaluation.load_set(entity_evaluation.DEFAULT_SET)
    ids = {e["id"] for e in knowledge["entities"]} | {m["id"] for m in knowledge["memories"]}
    assert len(questions) >= 100 and len({q.qid for q in questions}) == len(questions)
    assert all(q.gold and set(q.gold) <= ids for q in questions)
    assert any(not q.query.isascii() for q in questions)  # Chinese questions too
    names = {e["id"] for e in knowledge["entities"]}
    assert all(r["source"] in names and r["target"] in names and 0 <= r["weight"] <= 1 for r in knowledge["relations"])


def test_eval_entities_scores_every_strategy_and_meets_its_targets(tmp_path, capsys):
    assert cli.main(["eval", "--entities", "--work-dir", str(tmp_path / "data")]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[-1].startswith("recall@1=") and "recall@5=" in lines[-1]
    for strategy in ("hybrid", "knowledge-only", "graph-only"):
        assert any(line.startswith(f"{strategy} ") and "overall" in line for line in lines)
    hybrid_r5 = float(lines[-1].split()[1].split("=")[1])
    assert hybrid_r5 >= 0.90
    found = next(line for line in lines if line.startswith("graph-only") and "entity answers found" in line)
    got, wanted = found.split("top 10: ")[1].split(";")[0].split("/")
    assert got == wanted


def test_eval_entities_json_and_a_set_of_ones_own(tmp_path, capsys):
    folder = tmp_path / "set"
    folder.mkdir()
    (folder / "knowledge.json").write_text(json.dumps({
        "entities": [{"id": "ada", "name": "Ada", "entity_type": "person"}, {"id": "acme", "name": "Acme", "entity_type": "organization"}],
        "relations": [{"source": "ada", "target": "acme", "relation_type": "WORKS_AT", "weight": 0.9}],
        "memories": [{"id": "m1", "text": "Ada likes tea"}],
    }))
    (folder / "questions.jsonl").write_text(json.dumps({"qid": "q1", "query": "Where does Ada work?", "gold": ["acme"], "category": "entity"}) + "\n")
    assert cli.main(["eval", "--entities", str(folder), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    report = json.loads(out[0])  # the one line: the headline figures are in it, and no text line follows it
    assert len(out) == 1, out
    assert report["strategies"]["graph-only"]["entity_answers_found"] == 1
    assert report["strategies"]["knowledge-only"]["overall"]["recall@10"] == 0.0
    assert report["strategies"]["hybrid"]["overall"]["recall@5"] == 1.0


def test_eval_json_on_a_corpus_is_one_json_line(tmp_path, capsys):
    """``--json`` printed the headline figures as a text line after the JSON, which a JSON reader of stdout choked on."""
    assert cli.main(["--data-dir", str(tmp_path / "data"), "eval", *_inputs(tmp_path), "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and json.loads(out[0])["overall"]["recall@1"] == 1.0, out


@pytest.mark.parametrize("limit", ["0", "-3", "101"])
def test_eval_refuses_a_limit_recall_does_not_take(tmp_path, capsys, limit):
    """0 or less ended in a traceback (IndexError) in the middle of the run; above 100 the API refuses it."""
    for argv in (["--entities"], _inputs(tmp_path)):
        assert cli.main(["--data-dir", str(tmp_path / "data"), "eval", *argv, "--limit", limit]) == 2
        out, err = capsys.readouterr()
        assert out == "" and err.startswith("mnemolog: error: argument --limit") and "1 to 100" in err and err.count("\n") == 1, err
    assert not (tmp_path / "data").exists()


def test_eval_entities_refuses_a_corpus_and_a_missing_set(tmp_path, capsys):
    assert cli.main(["eval", "--entities", *_inputs(tmp_path)]) == 2
    assert cli.main(["eval", "--entities", str(tmp_path / "nowhere")]) == 2
    assert cli.main(["eval"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("mnemolog: error: ") or "error" in line for line in err)
