"""``faceweave keys`` and ``faceweave serve``'s checks before anything starts: one line
each, documented exit codes, in-process (no server runs)."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from faceweave.apps import cli
from faceweave.errors import EXIT_ERROR, EXIT_OK, EXIT_USAGE


def test_keys_create_list_and_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "new" / "data"  # made on first use
    assert cli.main(["keys", "create", "--data", str(data), "--name", "ci"]) == EXIT_OK
    out, err = capsys.readouterr()
    key = out.strip()
    assert key.startswith("fw_") and key not in err
    key_id = err.split()[2]
    assert cli.main(["keys", "list", "--data", str(data)]) == EXIT_OK
    listed = capsys.readouterr().out
    assert key_id in listed and "active" in listed and key not in listed
    assert cli.main(["keys", "revoke", key_id, "--data", str(data)]) == EXIT_OK
    assert cli.main(["keys", "revoke", key_id, "--data", str(data)]) == EXIT_ERROR
    assert capsys.readouterr().err.endswith(f"no active key with id {key_id}\n")


def test_a_lost_pepper_is_said_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key store restored without its pepper.key: a new pepper had been made without
    a word, and every key, still listed as active, was refused."""
    data = tmp_path / "data"
    assert cli.main(["keys", "create", "--data", str(data), "--name", "ci"]) == EXIT_OK
    (data / "pepper.key").unlink()
    capsys.readouterr()
    for command in (["keys", "create", "--name", "two"], ["serve", "--port", "1"]):
        assert cli.main([*command, "--data", str(data)]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "pepper.key: missing, but the key store holds 1" in err
    assert not (data / "pepper.key").exists()
    # Its keys revoked, a new pepper starts a new set.
    key_id = next(line.split()[0] for line in _listed(data, capsys))
    assert cli.main(["keys", "revoke", key_id, "--data", str(data)]) == EXIT_OK
    assert cli.main(["keys", "create", "--data", str(data), "--name", "two"]) == EXIT_OK
    assert (data / "pepper.key").exists()


def _listed(data: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert cli.main(["keys", "list", "--data", str(data)]) == EXIT_OK
    return capsys.readouterr().out.splitlines()


def test_listing_keys_only_reads_and_a_key_nobody_saw_is_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``keys list`` had opened the store to write (a store only readable, another
    user's or a read-only mount, could not be listed); a key whose printing failed (a
    full disk behind stdout) had been stored, active, unseen."""
    import io
    import os

    data = tmp_path / "data"
    assert cli.main(["keys", "create", "--data", str(data), "--name", "ci"]) == EXIT_OK
    capsys.readouterr()
    before = {p.name: p.stat().st_mtime_ns for p in data.iterdir()}
    assert len(_listed(data, capsys)) == 1
    assert {p.name: p.stat().st_mtime_ns for p in data.iterdir()} == before  # (no -wal left)

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(28, os.strerror(28))

    with monkeypatch.context() as patched:
        patched.setattr("sys.stdout", Full())
        assert cli.main(["keys", "create", "--data", str(data), "--name", "lost"]) == EXIT_ERROR
    assert "could not be printed (No space left on device), so it was revoked" in (
        capsys.readouterr().err
    )
    lost = [line for line in _listed(data, capsys) if line.endswith("lost")]
    assert len(lost) == 1 and "revoked" in lost[0]
    # stdout closed (Python's is None then): no key is made at all.
    with monkeypatch.context() as patched:
        patched.setattr("sys.stdout", None)
        assert cli.main(["keys", "create", "--data", str(data), "--name", "unseen"]) == EXIT_ERROR
    assert "stdout is closed" in capsys.readouterr().err
    assert not [line for line in _listed(data, capsys) if line.endswith("unseen")]
    # --data names the folder: a path to the database itself is told so.
    assert cli.main(["keys", "list", "--data", str(data / "faceweave.db")]) == EXIT_ERROR
    assert "--data names the folder holding the key store" in capsys.readouterr().err


def test_too_many_workers_is_a_usage_error_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--workers`` takes at most twice the cores (at least 4): 99 workers on 2 cores
    had started 1004 threads in 10.8 GB. Refused before --data is made."""
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    data = tmp_path / "data"
    assert cli.main(["serve", "--workers", "99", "--data", str(data)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("faceweave: error: workers must be from 0 to 4 ") and "got 99" in err
    assert not data.exists()


def test_listing_keys_makes_no_key_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``keys list`` or ``revoke`` on a folder without a key store (a mistyped --data)
    is one error line, and leaves no folder or database behind (it had made both and
    listed nothing, exit 0)."""
    typo = tmp_path / "typo"
    for command in (["keys", "list"], ["keys", "revoke", "k1"]):
        assert cli.main([*command, "--data", str(typo)]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert err.startswith(f"faceweave: error: {typo}: no key store here (faceweave keys")
        assert err.count("\n") == 1
    assert not typo.exists()


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["keys", "create", "--name", "ci"]])
def test_a_data_folder_that_cannot_be_made_is_one_line(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    for data in (blocker, blocker / "below"):
        assert cli.main([*command, "--data", str(data)]) == EXIT_ERROR
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("faceweave: error: "), err
        assert "Traceback" not in err


def test_serve_on_a_taken_port_fails_before_loading_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = ["serve", "--port", str(port), "--data", str(tmp_path / "data")]
        assert cli.main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err == f"faceweave: error: cannot listen on 127.0.0.1:{port}: Address already in use\n"


def test_serve_on_a_host_that_is_no_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--host", "no-such-host.invalid", "--data", str(tmp_path / "data")]
    assert cli.main(argv) == EXIT_USAGE
    assert "--host no-such-host.invalid" in capsys.readouterr().err


def test_serve_keeps_its_logging(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The commands print the library's warnings as one prefixed line each, once; a
    server logs every line, with its tracebacks, as servers do (the one-line handler
    had taken its log over)."""
    import logging

    from faceweave.apps import service_cli

    seen: dict[str, object] = {}

    def fake_serve(args: object) -> int:
        logger = logging.getLogger("faceweave")
        seen["ours"] = any(isinstance(h, cli._LineHandler) for h in logger.handlers)
        seen["propagate"] = logger.propagate
        return EXIT_OK

    monkeypatch.setattr(service_cli, "run_serve", fake_serve)
    assert cli.main(["serve", "--data", str(tmp_path / "d")]) == EXIT_OK
    assert seen == {"ours": False, "propagate": True}
    monkeypatch.setattr(service_cli, "run_keys", fake_serve)
    assert cli.main(["keys", "list", "--data", str(tmp_path / "d")]) == EXIT_OK
    assert seen == {"ours": True, "propagate": False}


def test_the_servers_log_has_faceweaves_lines_at_its_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its jobs' and live sessions' info lines are in the server's log, as uvicorn's
    own are (they had been lost, and warnings came out bare); a source photo's advice
    is left to its job's notes; the logging is as it was once the server stops."""
    import logging

    import uvicorn

    before = logging.getLogger("faceweave").handlers[:]

    def fake_run(app: object, **kwargs: object) -> None:
        logging.getLogger("faceweave.service").info("job j1 done")
        logging.getLogger("faceweave.service.live").debug("not at info")
        logging.getLogger("faceweave.advice").warning("source face wears glasses")

    monkeypatch.setattr(uvicorn, "run", fake_run)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert cli.main(["serve", "--port", str(port), "--data", str(tmp_path / "d")]) == EXIT_OK
    err = capsys.readouterr().err
    assert re.search(r"^INFO: +faceweave\.service: job j1 done$", err, re.M), err
    assert "not at info" not in err and "glasses" not in err
    assert logging.getLogger("faceweave").handlers == before
    assert logging.getLogger("faceweave.advice").level == logging.NOTSET
