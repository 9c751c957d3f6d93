"""`proofrl search --ray` on a machine without Ray: one line naming the install command (no Ray needed here,
so this runs where tests/test_ray_workers.py is skipped)."""

import json
import sys

from conftest import requires_coq

pytestmark = requires_coq


def test_search_ray_without_ray_installed_is_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from proofrl.cli import app

    (tmp_path / "p.jsonl").write_text(
        json.dumps({"name": "t_true", "header": "", "formal_statement": "Theorem t_true : True."}) + "\n"
    )
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as on a machine without it
    r = CliRunner().invoke(
        app,
        [
            "search",
            str(tmp_path / "p.jsonl"),
            "--policy",
            "openai:http://127.0.0.1:9/v1",
            "--model",
            "m",
            "--ray",
            "local",
            "--out",
            str(tmp_path / "out"),
        ],
    )
    assert r.exit_code == 2, r.output
    assert 'pip install -e ".[distributed]"' in r.output and "Traceback" not in r.output
