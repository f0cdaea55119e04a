from pathlib import Path

import pytest
from hypothesis import settings

# Property tests draw the same examples on every run and machine: a failure reproduces, and a
# green run stays green (derandomize derives the examples from each test's own source).
settings.register_profile("repo", derandomize=True, print_blob=True)
settings.load_profile("repo")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES
