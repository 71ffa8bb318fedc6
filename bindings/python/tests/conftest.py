"""conftest.py: the shared models (../shared/testdata, or OX_TESTDATA) and the `oxidize` binary
the package is checked against (OX_BIN, else the checkout's build)."""
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TESTDATA = Path(os.environ.get("OX_TESTDATA", REPO.parent / "shared" / "testdata"))
KJV = TESTDATA / "models" / "kjv-15m-q4_k_m.gguf"
BERT = REPO / "tests" / "data" / "arch" / "models" / "bert-f16.gguf"
OX_BIN = Path(os.environ.get("OX_BIN", REPO / "build" / "apps" / "oxidize" / "oxidize"))


def run_cli(*args: str) -> str:
    """`oxidize ARGS`' standard output (the generated text of `run`)."""
    out = subprocess.run([str(OX_BIN), *args], check=True, capture_output=True)
    return out.stdout.decode("utf-8")


@pytest.fixture(scope="session")
def kjv_path() -> str:
    if not KJV.exists():
        pytest.skip(f"no test model at {KJV}")
    return str(KJV)


@pytest.fixture(scope="session")
def cli() -> object:
    if not OX_BIN.exists():
        pytest.skip(f"no oxidize binary at {OX_BIN} (build the checkout first)")
    return run_cli


@pytest.fixture(scope="session")
def llm(kjv_path: str):
    import oxidize
    return oxidize.Llama(kjv_path, n_ctx=512, verbose=False)
