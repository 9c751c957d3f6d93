"""The machine's pace: the wall seconds of one fixed ``coqc`` job, so rows searched on several machines (a row
whose budget is wall seconds) say how fast each one was; unknown, never guessed, where the job cannot run."""

from __future__ import annotations

from conftest import requires_coq

from proofrl.eval.provers import RowsConfig, write_report
from proofrl.eval.row_store import Row
from proofrl.provers.coq import pace


@requires_coq
def test_the_pace_is_the_fixed_job_s_wall_seconds_and_unknown_when_it_fails(monkeypatch) -> None:
    got = pace.machine_pace()
    assert got is not None and 0 < got["pace_s"] < 60 and got["load"] >= 0
    monkeypatch.setattr(pace, "JOB", "Goal False. Proof. exact I. Qed.\n")  # a job coqc rejects
    assert pace.machine_pace() is None
    monkeypatch.setenv("PATH", "")  # no coqc at all
    assert pace.machine_pace() is None


def test_a_row_searched_in_several_sittings_reports_each_one_s_pace(tmp_path) -> None:
    record = {"name": "M.t", "proved": True}
    sittings = [
        {"started": None, "modules": 3, "lemmas": 7, "wall_s": 4000.0, "wall_from": "its modules"},
        {"started": "2026-01-02 03:04:05", "pace_s": 2.046, "load": 1.5, "modules": 1, "lemmas": 2, "wall_s": 9.4},
        {"started": "2026-01-03 00:00:00", "pace_s": None, "modules": 1, "lemmas": 1, "wall_s": 1.0},
    ]
    rows = [Row("(f) memory", [record], 1.0, 1.0, notes={"sittings": sittings})]
    settings = RowsConfig(rows=("f",))
    write_report(tmp_path, rows, label="files", settings=settings, command="c", load={"before": 0, "after": 0})
    text = (tmp_path / "report.md").read_text()
    assert (
        "(f) memory was searched in 3 sittings: 3 modules (7 lemmas) begun at a time not recorded, 4,000 s of wall "
        "(its modules added up), pace not recorded; 1 modules (2 lemmas) begun 2026-01-02 03:04:05, 9 s of wall, "
        "pace 2.05 s for the fixed Coq job at load 1.5; 1 modules (1 lemmas) begun 2026-01-03 00:00:00, 1 s of "
        "wall, pace unknown (the fixed Coq job did not run)." in text
    )
    one = [Row("(f) memory", [record], 1.0, 1.0, notes={"sittings": sittings[1:2]})]
    write_report(tmp_path, one, label="files", settings=settings, command="c", load={"before": 0, "after": 0})
    assert "sittings" not in (tmp_path / "report.md").read_text()
