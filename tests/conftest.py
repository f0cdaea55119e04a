from pathlib import Path

import pytest

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
