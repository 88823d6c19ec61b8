"""Property-based API tests from the app's own OpenAPI schema (schemathesis, in-process ASGI).

Hypothesis drives schemathesis's strategies directly: schemathesis's pytest plugin
does not run under pytest 9 yet.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

from faceweave.service import ServiceConfig, create_app
from tests.service.conftest import auth, make_key

OPERATIONS = [
    ("POST", "/v1/jobs"),
    ("GET", "/v1/jobs"),
    ("GET", "/v1/jobs/{job_id}"),
    ("GET", "/v1/jobs/{job_id}/result"),
    ("DELETE", "/v1/jobs/{job_id}"),
    ("POST", "/v1/preview"),
    ("GET", "/healthz"),
    ("POST", "/v1/live/offer"),
    ("POST", "/v1/live/{session_id}/source"),
    ("POST", "/v1/live/{session_id}/fusion"),
    ("POST", "/v1/live/{session_id}/gaze"),
    ("DELETE", "/v1/live/{session_id}"),
]
# Every answer is one the schema declares, with the declared body and media type: a
# client generated from /openapi.json handles what it gets.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, Any]]:
    data_dir: Path = tmp_path_factory.mktemp("schema")
    key = make_key(data_dir, "fuzz")
    config = ServiceConfig(
        data_dir=data_dir,
        workers=0,
        preview_enabled=True,
        rate_burst=100_000,
        rate_per_s=10_000.0,
        max_upload_bytes=256 * 1024,
    )
    app = create_app(config)
    with TestClient(app):  # runs the lifespan; schemathesis's calls share app.state
        yield app, key, schemathesis.openapi.from_asgi("/openapi.json", app)


def test_schema_lists_every_operation(running: tuple[Any, str, Any]) -> None:
    found = {(op.ok().method.upper(), op.ok().path) for op in running[2].get_all_operations()}
    assert set(OPERATIONS) <= found


@pytest.mark.parametrize(("method", "path"), OPERATIONS)
@pytest.mark.parametrize("with_key", [True, False], ids=["key", "no-key"])
def test_no_server_errors(
    running: tuple[Any, str, Any], method: str, path: str, with_key: bool
) -> None:
    _, key, schema = running
    operation = schema[path][method]
    headers = auth(key) if with_key else None

    @given(case=operation.as_strategy())
    @settings(
        max_examples=30 if with_key else 5,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(headers=headers, checks=CHECKS)

    check()
