"""Access control: keys, ownership (404 for another key's job), rate limit."""

from __future__ import annotations

import io
from pathlib import Path

from PIL import Image

from faceweave.service.auth import RateLimiter
from tests.service.conftest import AppFactory, auth, make_key


def _png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (32, 32), (200, 150, 120)).save(buffer, format="PNG")
    return buffer.getvalue()


def _files() -> dict[str, tuple[str, bytes]]:
    return {"source": ("s.png", _png()), "target": ("t.png", _png())}


def test_keys_are_required(make_client: AppFactory, tmp_path: Path) -> None:
    client = make_client(workers=0, data_dir=tmp_path / "d")
    for method, path in (
        ("GET", "/v1/jobs"),
        ("GET", "/v1/jobs/" + "0" * 32),
        ("GET", "/v1/jobs/" + "0" * 32 + "/result"),
        ("DELETE", "/v1/jobs/" + "0" * 32),
    ):
        response = client.request(method, path)
        assert response.status_code == 401, (method, path)
        assert response.json()["error"]["code"] == "unauthorized"
        assert response.headers["www-authenticate"] == "Bearer"
    assert client.post("/v1/jobs", files=_files()).status_code == 401
    assert client.post("/v1/preview", files=_files()).status_code == 401
    for bad in ("fw_" + "x" * 43, "nonsense", "fw_", "Basic abc"):
        response = client.get("/v1/jobs", headers=auth(bad))
        assert response.status_code == 401, bad
    basic = client.get("/v1/jobs", headers={"Authorization": "Basic YTpi"})
    assert basic.status_code == 401


def test_another_key_cannot_see_a_job(make_client: AppFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    alice, bob = make_key(data_dir, "alice"), make_key(data_dir, "bob")
    client = make_client(workers=0, data_dir=data_dir)
    job = client.post("/v1/jobs", headers=auth(alice), files=_files()).json()
    path = f"/v1/jobs/{job['id']}"
    assert client.get(path, headers=auth(alice)).status_code == 200
    for method, url in (("GET", path), ("GET", path + "/result"), ("DELETE", path)):
        response = client.request(method, url, headers=auth(bob))
        assert response.status_code == 404, (method, url)
        assert response.json()["error"] == {"code": "not_found", "message": "no such job"}
    assert client.get("/v1/jobs", headers=auth(bob)).json()["jobs"] == []
    # Alice's job survived Bob's delete attempt.
    assert client.get(path, headers=auth(alice)).json()["state"] == "queued"
    assert (data_dir / "jobs" / job["id"]).is_dir()


def test_revoked_key_is_refused(make_client: AppFactory, tmp_path: Path) -> None:
    from faceweave.service.auth import revoke_key
    from faceweave.service.db import Database

    data_dir = tmp_path / "d"
    key = make_key(data_dir, "carol")
    client = make_client(workers=0, data_dir=data_dir)
    assert client.get("/v1/jobs", headers=auth(key)).status_code == 200
    db = Database(data_dir / "faceweave.db")
    key_id = db.query("SELECT id FROM keys")[0]["id"]
    assert revoke_key(db, key_id)
    db.close()
    assert client.get("/v1/jobs", headers=auth(key)).status_code == 401


def test_only_a_hash_of_the_key_is_stored(tmp_path: Path) -> None:
    key = make_key(tmp_path, "dave")
    raw = (tmp_path / "faceweave.db").read_bytes()
    assert key.encode() not in raw
    assert key[3:20].encode() not in raw
    assert oct((tmp_path / "pepper.key").stat().st_mode & 0o777) == "0o600"


def test_rate_limit_gives_429_with_retry_after(make_client: AppFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    key, other = make_key(data_dir, "eve"), make_key(data_dir, "frank")
    client = make_client(workers=0, data_dir=data_dir, rate_per_s=0.5, rate_burst=3)
    codes = [client.get("/v1/jobs", headers=auth(key)).status_code for _ in range(5)]
    assert codes[:3] == [200, 200, 200]
    assert codes[3:] == [429, 429]
    limited = client.get("/v1/jobs", headers=auth(key))
    assert limited.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(limited.headers["retry-after"]) <= 2
    # Per key: another key is not affected.
    assert client.get("/v1/jobs", headers=auth(other)).status_code == 200


def test_active_jobs_per_key_are_capped(make_client: AppFactory, tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    key = make_key(data_dir, "greedy")
    client = make_client(workers=0, data_dir=data_dir, max_active_jobs_per_key=2)
    codes = [
        client.post("/v1/jobs", headers=auth(key), files=_files()).status_code for _ in range(3)
    ]
    assert codes == [202, 202, 429]


def test_token_bucket_refills() -> None:
    limiter = RateLimiter(rate=2.0, burst=2)
    assert limiter.take("k", now=0.0) == 0.0
    assert limiter.take("k", now=0.0) == 0.0
    assert limiter.take("k", now=0.0) == 0.5
    assert limiter.take("k", now=0.5) == 0.0
    assert RateLimiter.retry_after(0.2) == "1"
    assert RateLimiter.retry_after(2.1) == "3"
