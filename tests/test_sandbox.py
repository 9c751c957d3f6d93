"""The prover sandbox: each test runs a real process through the real wrapper and checks one wall.

Attempts that must fail are also run with the sandbox ``off`` where that shows the attempt itself works, so
a passing test means the sandbox stopped it, not that the probe was broken.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import textwrap
import time

import psutil
import pytest
from conftest import NAT, requires_coq

from proofrl.errors import ConfigError, StatementError
from proofrl.provers import sandbox
from proofrl.provers.base import Status, Theorem
from proofrl.provers.process import ProverProcess, run_once
from proofrl.provers.sandbox import Sandbox

WORKING = [m for m in ("bwrap", "unshare") if sandbox.probe(m) is None]
confined = pytest.mark.parametrize(
    "mode", WORKING or [pytest.param("none", marks=pytest.mark.skip("no sandbox works here"))]
)


def py(mode: str, code: str, scratch, **env: str):
    """Run Python ``code`` in ``scratch`` under ``mode``; returns the RunResult."""
    if env:
        os.environ.update(env)
    try:
        return run_once(
            [sys.executable, "-I", "-c", textwrap.dedent(code)], timeout=20, cwd=str(scratch), sandbox=Sandbox(mode)
        )
    finally:
        for k in env:
            os.environ.pop(k, None)


@pytest.fixture
def scratch(tmp_path):
    d = tmp_path / "scratch"
    d.mkdir()
    return d


# -- network ----------------------------------------------------------------------------------------------------
CONNECT = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3)
    print("connected")
except OSError as e:
    print("refused", e.errno)
"""


@confined
def test_no_tcp_connection_leaves_the_sandbox(mode, scratch):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        code = CONNECT.format(port=listener.getsockname()[1])
        assert py("off", code, scratch).stdout.strip() == "connected"  # the probe reaches the host when unconfined
        listener.accept()[0].close()
        r = py(mode, code, scratch)
        assert r.stdout.startswith("refused"), r.stderr
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing arrived from inside


@confined
def test_only_loopback_exists_and_it_is_down(mode, scratch):
    r = py(mode, "import socket; print(sorted(n for _, n in socket.if_nameindex()))", scratch)
    assert r.stdout.strip() == "['lo']"


# -- filesystem -------------------------------------------------------------------------------------------------
WRITE = """
import os
for p in {paths!r}:
    try:
        open(p, "w").write("x")
        print("wrote", p)
    except OSError as e:
        print("denied", p, e.strerror)
"""


@confined
def test_writes_land_only_in_scratch(mode, scratch, tmp_path):
    outside = [
        str(tmp_path / "beside-scratch"),
        "/var/tmp/proofrl-sandbox-probe",
        os.path.expanduser("~/proofrl-sandbox-probe"),
        "/etc/proofrl-sandbox-probe",
        "/dev/shm/proofrl-sandbox-probe",
    ]
    r = py(mode, WRITE.format(paths=[str(scratch / "inside"), "relative", *outside]), scratch)
    lines = r.stdout.splitlines()
    assert lines[:2] == [f"wrote {scratch / 'inside'}", "wrote relative"], r.stderr
    assert all(line.startswith("denied") for line in lines[2:]) and len(lines) == 2 + len(outside)
    assert (scratch / "inside").read_text() == "x" and (scratch / "relative").exists()
    assert not any(os.path.exists(p) for p in outside)


@confined
def test_host_temp_and_home_directories_are_hidden(mode, scratch, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    code = f"""
try:
    print(open({str(secret)!r}).read())
except OSError as e:
    print("hidden", e.strerror)
"""
    assert py("off", code, scratch).stdout.splitlines()[0] == "hunter2"
    r = py(mode, code, scratch)
    assert r.stdout.splitlines()[0] == "hidden No such file or directory", r.stderr


@confined
def test_a_path_on_the_command_line_reached_through_a_symlink_in_a_hidden_directory(mode, scratch, tmp_path):
    """``/tmp/run/shared -> /elsewhere/shared`` (a checkout with its data linked beside it): the prover is
    given the /tmp path, so that path must lead to the (read-only) target inside the sandbox too."""
    target = os.path.dirname(os.path.abspath(__file__))  # a real directory outside the hidden ones, normally
    link = tmp_path / "linked"
    link.symlink_to(target)
    given = str(link / os.path.basename(__file__))
    argv = [sys.executable, "-I", "-c", "import sys; print(len(open(sys.argv[1]).read()) > 0)", given]
    r = run_once(argv, timeout=20, cwd=str(scratch), sandbox=Sandbox(mode))
    assert r.stdout.strip() == "True", r.stderr
    w = run_once(
        [sys.executable, "-I", "-c", f"open({str(link / 'new')!r}, 'w')"],
        timeout=20,
        cwd=str(scratch),
        sandbox=Sandbox(mode),
    )
    assert not (link / "new").exists() and w.returncode != 0


@confined
def test_no_other_process_is_visible_or_reachable(mode, scratch):
    r = py(
        mode,
        f"import os\ntry:\n os.kill({os.getpid()}, 0); print('reached')\n"
        "except OSError as e: print('alone', e.strerror)",
        scratch,
    )
    assert r.stdout.startswith("alone"), r.stderr


def test_secrets_leave_the_environment_and_tmpdir_is_scratch(scratch):
    code = "import os; print(sorted(k for k in os.environ if k.startswith('PROOFRL_T')), os.environ['TMPDIR'])"
    r = py("off", code, scratch, PROOFRL_TEST_API_KEY="s3cret", PROOFRL_TEST_SETTING="kept")
    assert r.stdout.split() == ["['PROOFRL_TEST_SETTING']", str(scratch)]


def test_a_file_above_max_file_mb_cannot_be_written(scratch):
    code = "open('big', 'wb').write(b'x' * (3 * 2**20))"
    r = run_once(
        [sys.executable, "-I", "-c", code], timeout=20, cwd=str(scratch), sandbox=Sandbox("off", max_file_mb=1)
    )
    # Python ignores SIGXFSZ, so the write fails with EFBIG instead of the signal killing it
    assert r.returncode == 1 and "File too large" in r.stderr and (scratch / "big").stat().st_size <= 2**20


# -- process handling inside the sandbox ------------------------------------------------------------------------
HANDLES_INT = (
    "import os, signal, sys\nsignal.signal(signal.SIGINT, lambda *a: os.write(1, b'interrupted\\n'))\nos.write(1, "
    "b'ready\\n')\nsys.stdin.readline()\nos.write(1, b'still here\\n')\n"
)


@pytest.mark.parametrize("mode", ["off", *WORKING])
def test_interrupt_reaches_the_prover_and_the_wrapper_survives(mode):
    p = ProverProcess([sys.executable, "-I", "-c", HANDLES_INT], sandbox=Sandbox(mode))
    try:
        assert p.read_until(lambda b: b.find(b"\n") + 1, 10) == b"ready\n"
        assert "-c" in psutil.Process(p.pid).cmdline()  # pid is the prover's own, not the wrapper's
        p.interrupt()
        assert p.read_until(lambda b: b.find(b"\n") + 1, 10) == b"interrupted\n"
        p.write(b"go on\n")
        assert p.read_until(lambda b: b.find(b"\n") + 1, 10) == b"still here\n"
    finally:
        p.kill()
    assert not os.path.exists(p.scratch)  # the scratch directory goes with the process


@pytest.mark.parametrize("mode", ["off", *WORKING])
def test_killing_the_prover_pid_ends_the_whole_sandbox(mode):
    p = ProverProcess([sys.executable, "-I", "-c", HANDLES_INT], sandbox=Sandbox(mode))
    p.read_until(lambda b: b.find(b"\n") + 1, 10)
    tree = [psutil.Process(p.proc.pid), *psutil.Process(p.proc.pid).children(recursive=True)]
    os.kill(p.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while p.alive:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.kill()
    assert all(not q.is_running() or q.status() == psutil.STATUS_ZOMBIE for q in tree)


# -- choosing a mode --------------------------------------------------------------------------------------------
def test_auto_degrades_to_off_with_a_loud_warning(monkeypatch, tmp_path, caplog):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither bwrap nor unshare can be found
    with caplog.at_level(logging.WARNING, logger="proofrl.sandbox"):
        sb = sandbox.resolve("auto")
    assert sb.mode == "off" and "bwrap: bwrap not on PATH" in sb.reason and "unshare: unshare" in sb.reason
    assert "NOT SANDBOXED" in caplog.text
    assert sb.describe() == {"mode": "off", "network": False, "filesystem": False, "reason": sb.reason}
    with pytest.raises(
        ConfigError,
        match=r"sandbox 'bwrap' does not work here: bwrap not on PATH \(Debian: apt-get install bubblewrap\)",
    ):
        sandbox.resolve("bwrap")


def test_unknown_mode_lists_the_choices():
    with pytest.raises(
        ConfigError, match=r"unknown sandbox mode 'chroot'; choose one of \['auto', 'bwrap', 'unshare', 'off'\]"
    ):
        sandbox.resolve("chroot")
    from proofrl.server.config import load_serve_config

    with pytest.raises(ConfigError, match="sandbox must be one of"):
        load_serve_config(None, sandbox="chroot")


# -- Coq's own file commands, with no screening in front: the sandbox is the wall -------------------------------
@pytest.fixture(params=WORKING or [pytest.param("none", marks=pytest.mark.skip("no sandbox works here"))])
def coq_confined(request):
    before = sandbox.current()
    yield sandbox.configure(request.param)
    sandbox.configure(before)


@requires_coq
def test_coq_redirect_outside_scratch_fails_with_the_reason_in_the_verdict(coq_confined):
    from proofrl.provers.factory import make_pool
    from proofrl.provers.pool import PoolConfig

    probe = "/var/tmp/proofrl-coq-redirect-probe"
    evil = Theorem("t", "Theorem t : True.", f'{NAT}\nRedirect "{probe}" Print nat.')
    with make_pool("coq", pool=PoolConfig(workers=1)) as pool:
        v = pool.check(evil, "Proof. exact I. Qed.")
    assert (v.status, v.reasons) == (Status.ERROR, ("header failed to load",))
    assert f'System error: "{probe}.out: Read-only file system"' in v.messages[0].text
    assert not os.path.exists(probe + ".out")


@requires_coq
def test_coq_load_cannot_see_host_files_and_redirect_into_scratch_works(coq_confined, tmp_path):
    from proofrl.provers.coq.session import CoqSession

    secret = tmp_path / "secret.v"
    secret.write_text("Definition secret := 42.\n")
    with pytest.raises(StatementError, match=f"Can't find file {secret}"):
        CoqSession(f'Load "{secret}".')
    s = CoqSession('Redirect "mine" Print nat.')  # coqidetop sends the text as feedback; the file is made
    try:
        assert os.listdir(s.process.scratch) == ["mine.out"]
    finally:
        s.close()


@requires_coq
def test_coqc_final_check_runs_confined(coq_confined):
    from proofrl.provers.coq import CoqProver

    p = CoqProver(NAT)
    try:
        t = Theorem("t", "Theorem t : forall n : nat, n + 0 = n.", NAT)
        assert p.final_check(t, ["intros.", "lia."]).status is Status.VALID
        evil = Theorem("e", "Theorem e : True.", f'{NAT}\nRedirect "/var/tmp/proofrl-coqc-probe" Print nat.')
        v = p.final_check(evil, ["exact I."])
        assert v.status is Status.ERROR and "Read-only file system" in v.messages[0].text
    finally:
        p.close()
