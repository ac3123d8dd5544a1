"""``rocketq dashboard --users``: a sign-in before any page, sessions in an HttpOnly SameSite=Strict
cookie, a CSRF token in every form, and a read-only role that can look but not change."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
import yaml
from tests.harness import SMALL_STORE, Cluster, start_cluster, unique_name

from rocketq.dashboard import start_dashboard
from rocketq.dashboard.auth import hash_password, load_users, verify_password
from rocketq.errors import ConfigError

pytestmark = pytest.mark.timeout(120)
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = start_cluster(tmp_path_factory.mktemp("dash-login"), *SMALL_STORE)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def users_file(tmp_path: Path) -> Path:
    path = tmp_path / "users.yml"
    path.write_text(yaml.safe_dump({"users": [
        {"username": "alice", "password": hash_password("alice-pw", iterations=1000), "role": "admin"},
        {"username": "bob", "password": hash_password("bob-pw", iterations=1000), "role": "read-only"},
    ]}))
    return path


@pytest.fixture
async def url(cluster: Cluster, users_file: Path) -> AsyncIterator[str]:
    server = await start_dashboard(cluster.namesrv, "127.0.0.1", 0, users=load_users(users_file))
    try:
        yield server.url
    finally:
        await server.close()


def _client() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))


async def _sign_in(http: aiohttp.ClientSession, url: str, user: str, password: str) -> aiohttp.ClientResponse:
    return await http.post(f"{url}/login", data={"username": user, "password": password, "next": "/topics"},
                           allow_redirects=False)


async def _csrf(http: aiohttp.ClientSession, url: str) -> str:
    async with http.get(f"{url}/topics") as r:
        assert r.status == 200
        match = CSRF.search(await r.text())
    assert match, "a form without its CSRF token"
    return match.group(1)


async def test_every_page_needs_a_sign_in(url: str) -> None:
    async with _client() as http:
        r = await http.get(f"{url}/topics?system=1", allow_redirects=False)
        assert r.status == 303 and r.headers["Location"] == "/login?next=/topics?system=1"
        assert (await http.get(f"{url}/api/cluster")).status == 401
        r = await http.post(f"{url}/topic/update", data={"topic": "X"}, allow_redirects=False)
        assert r.status == 401
        assert (await _sign_in(http, url, "alice", "wrong")).status == 401
        assert (await _sign_in(http, url, "mallory", "alice-pw")).status == 401


async def test_an_admin_signs_in_and_changes_with_a_csrf_token(url: str) -> None:
    async with _client() as http:
        r = await _sign_in(http, url, "alice", "alice-pw")
        assert r.status == 303 and r.headers["Location"] == "/topics"
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        page = await (await http.get(f"{url}/topics")).text()
        assert "signed in as alice (admin)" in page
        forms = re.findall(r'<form\b[^>]*method="post"[^>]*>', page)
        assert forms and page.count('name="csrf"') == len(forms)
        topic = unique_name("DashLogin")
        refused = await http.post(f"{url}/topic/update", data={"topic": topic, "cluster": "DefaultCluster"})
        assert refused.status == 403 and "CSRF" in await refused.text()
        token = await _csrf(http, url)
        done = await http.post(f"{url}/topic/update",
                               data={"topic": topic, "cluster": "DefaultCluster", "csrf": token})
        assert done.status == 200 and "created/updated" in await done.text()
        await http.post(f"{url}/logout", data={"csrf": token}, allow_redirects=False)
        assert (await http.get(f"{url}/topics", allow_redirects=False)).status == 303


async def test_a_read_only_user_reads_but_cannot_change(url: str) -> None:
    async with _client() as http:
        assert (await _sign_in(http, url, "bob", "bob-pw")).status == 303
        token = await _csrf(http, url)
        r = await http.post(f"{url}/topic/update",
                            data={"topic": unique_name("RO"), "cluster": "DefaultCluster", "csrf": token})
        assert r.status == 403 and "read-only" in await r.text()
        assert (await http.get(f"{url}/api/cluster")).status == 200


def test_passwords_are_hashed_and_checked() -> None:
    stored = hash_password("s3cret", iterations=1000)
    assert stored.startswith("pbkdf2_sha256$1000$") and "s3cret" not in stored
    assert verify_password("s3cret", stored) and not verify_password("other", stored)
    assert not verify_password("s3cret", "plain-text")


@pytest.mark.parametrize(("users", "message"), [
    ([{"username": "a", "password": "plain", "role": "admin"}], "not a pbkdf2_sha256 hash"),
    ([{"username": "a", "password": "pbkdf2_sha256$1$x$y", "role": "root"}], "admin or read-only"),
    ([], "no users"),
])
def test_a_bad_users_file_is_refused(tmp_path: Path, users: list[dict[str, str]], message: str) -> None:
    path = tmp_path / "users.yml"
    path.write_text(yaml.safe_dump({"users": users}))
    with pytest.raises(ConfigError, match=message) as info:
        load_users(path)
    assert "plain" not in str(info.value)
