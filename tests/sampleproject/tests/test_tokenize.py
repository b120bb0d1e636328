"""Plain tests: no marker, no GPU. They must never wait for gpucheck nor load anything of it."""

from record import record


def tokenize(text: str) -> list[str]:
    return text.lower().split()


def test_tokenize_splits_on_spaces() -> None:
    assert tokenize("GPU tests  on CI") == ["gpu", "tests", "on", "ci"]


def test_tokenize_empty() -> None:
    assert tokenize("") == []
    record("unmarked")
