"""``mnemolog eval`` writes its rankings where ``--rankings`` says, by default into the data directory."""

from __future__ import annotations

import json

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
    assert cli.main(["eval", *_inputs(tmp_path), "--rankings", str(target)]) == 0
    assert json.loads(target.read_text().splitlines()[0])["gold"] == ["t1"]
