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


@pytest.fixture(autouse=True, scope="session")
def _pack_cache(tmp_path_factory):
    """Packs the tests load are cached for the run (subprocesses too), never in the user's
    cache folder."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FIREWALL_CACHE_DIR", str(tmp_path_factory.mktemp("pack-cache")))
        yield
