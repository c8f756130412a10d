import pytest


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    """Run every CLI test inside its own empty directory (default outputs land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path

