"""The Python API page's first example (docs/python.md, linked from the README), run as written
but against a port where no server listens: the missing server is reported, not a bare `None`."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from conftest import EXAMPLES, ROOT
from patience import HANG_S

README_URL = "http://127.0.0.1:8000/v1"


def readme_python_block() -> str:
    text = (ROOT / "docs" / "python.md").read_text()
    return text.split("```python\n", 1)[1].split("\n```", 1)[0]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_readme_example_reports_an_unreachable_server(tmp_path: Path) -> None:
    code = readme_python_block()
    assert README_URL in code and '"examples/plate.png"' in code
    url = f"http://127.0.0.1:{closed_port()}/v1"
    code = code.replace(README_URL, url).replace(
        '"examples/plate.png"', repr(str(EXAMPLES / "plate.png"))
    )
    script = tmp_path / "example.py"
    script.write_text(code)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_S
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.strip().splitlines()
    assert len(printed) == 1, done.stdout
    assert printed[0].startswith("no answer: "), printed[0]
    assert f"cannot reach the LLM server at {url}: connection refused" in printed[0]
    assert (tmp_path / "out" / "trace.json").is_file()  # the failed run is still recorded
