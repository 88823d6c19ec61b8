"""``faceweave keys`` and ``faceweave serve``'s checks before anything starts: one line
each, documented exit codes, in-process (no server runs)."""

from __future__ import annotations

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


@pytest.mark.parametrize("command", [["serve", "--port", "1"], ["keys", "list"]])
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
