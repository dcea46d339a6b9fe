"""The commit ``/health`` and ``/v1/capabilities`` report: asked of git, with a clean fallback."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from mnemolog.api import app as app_module

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(cwd: Path, *argv: str) -> str:
    command = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main", *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "app.py").write_text("# app\n")
    _git(repo, "add", "app.py")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


@needs_git
def test_the_running_source_reports_its_checkout_commit():
    # The source may sit in a worktree, whose .git is a file, not a directory.
    source = Path(app_module.__file__).resolve().parent
    expected = _git(source, "rev-parse", "HEAD")[:12]
    assert app_module.version_info()["commit"] == expected


@needs_git
def test_packed_refs_are_read(checkout):
    _git(checkout, "pack-refs", "--all")
    assert not (checkout / ".git" / "refs" / "heads" / "main").exists()
    assert app_module.source_commit(checkout) == _git(checkout, "rev-parse", "HEAD")[:12]


@needs_git
def test_a_worktree_is_read(checkout, tmp_path):
    _git(checkout, "worktree", "add", "-q", "-b", "other", str(tmp_path / "wt"))
    assert (tmp_path / "wt" / ".git").is_file()
    assert app_module.source_commit(tmp_path / "wt") == _git(checkout, "rev-parse", "HEAD")[:12]


@needs_git
def test_untracked_copies_and_plain_directories_are_unknown(checkout, tmp_path):
    installed = checkout / "venv" / "mnemolog" / "api"
    installed.mkdir(parents=True)
    (installed / "app.py").write_text("# an installed copy inside some checkout\n")
    assert app_module.source_commit(installed) == "unknown"
    assert app_module.source_commit(tmp_path) == "unknown"


def test_no_git_is_unknown(checkout, monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert app_module.source_commit(checkout) == "unknown"
