"""``rocketq dashboard --acl-users`` in Chromium against a broker running RocketMQ 5.3's ACL 2.0
(authenticationEnabled + authorizationEnabled, bootstrapped by initAuthenticationUser): the Super
user signs in as admin and creates a topic; a Normal user signs in read-only and is refused a
change; a wrong password, an unknown user and a disabled user are refused; the dashboard's log
never shows a password."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from tests.dashboard.conftest import Dashboard, run_dashboard
from tests.harness import SMALL_STORE, Cluster, start_cluster, unique_name

from rocketq.acl import SessionCredentials
from rocketq.admin import AdminClient

pytestmark = pytest.mark.timeout(180)

ROOT = SessionCredentials("dashRoot", "dashRootPassword1")
BOB = SessionCredentials("dashBob", "dashBobPassword2")
CAROL = SessionCredentials("dashCarol", "dashCarolPassword3")


@pytest.fixture(scope="module")
def acl_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    boot = f'initAuthenticationUser={{"username":"{ROOT.access_key}","password":"{ROOT.secret_key}"}}'
    switches = ("--set", "authenticationEnabled=true", "--set", "authorizationEnabled=true")
    c = start_cluster(tmp_path_factory.mktemp("dash-acl2"), *SMALL_STORE, *switches, "--set", boot)

    async def users() -> None:
        async with AdminClient(c.namesrv, credentials=ROOT) as admin:
            await admin.create_user(c.broker, BOB.access_key, BOB.secret_key)
            await admin.create_user(c.broker, CAROL.access_key, CAROL.secret_key)
            await admin.update_user(c.broker, CAROL.access_key, user_status="disable")
    try:
        # Playwright's sync API may already run an event loop in this thread.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, users()).result()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def acl_dashboard(acl_cluster: Cluster) -> Iterator[Dashboard]:
    # The dashboard reads as the bootstrap user; the secret comes from the environment.
    yield from run_dashboard(acl_cluster.namesrv, "--acl-users", "--log-level", "INFO",
                             env={"ROCKETQ_ACCESS_KEY": ROOT.access_key,
                                  "ROCKETQ_SECRET_KEY": ROOT.secret_key})


def _sign_in(page: Any, dashboard: Dashboard, creds: SessionCredentials, path: str = "/topics") -> None:
    page.goto(dashboard.url + path)
    assert "/login" in page.url
    page.locator("#login input[name=username]").fill(creds.access_key)
    page.locator("#login input[name=password]").fill(creds.secret_key)
    page.locator("#login button").click()


def test_super_user_is_admin_normal_user_read_only(page: Any, acl_dashboard: Dashboard) -> None:
    _sign_in(page, acl_dashboard, ROOT)
    assert f"signed in as {ROOT.access_key} (admin)" in page.locator("#who").inner_text()
    topic = unique_name("DashAcl")
    form = page.locator("#create-topic")
    form.locator("input[name=topic]").fill(topic)
    form.locator("button").click()
    assert "created/updated" in page.locator("#topic-done").inner_text()
    page.locator("#who button").click()
    assert "/login" in page.url

    _sign_in(page, acl_dashboard, BOB)
    assert f"signed in as {BOB.access_key} (read-only)" in page.locator("#who").inner_text()
    assert page.locator("#topics").get_by_role("link", name=topic, exact=True).count() == 1
    form = page.locator("#create-topic")
    form.locator("input[name=topic]").fill(unique_name("DashAclRO"))
    form.locator("button").click()
    assert "read-only user: nothing was changed" in page.content()
    page.goto(acl_dashboard.url + "/topics")
    page.locator("#who button").click()


@pytest.mark.parametrize("creds", [
    SessionCredentials(BOB.access_key, "notBobsPassword"),
    SessionCredentials("dashNobody", "whateverPassword"),
    CAROL,  # disabled
], ids=["wrong-password", "unknown-user", "disabled-user"])
def test_refused_sign_ins(page: Any, acl_dashboard: Dashboard, creds: SessionCredentials) -> None:
    _sign_in(page, acl_dashboard, creds)
    assert "Wrong user name or password." in page.content()
    assert "/login" in page.url and page.locator("#who").count() == 0
    # The refusal is logged with the broker's reason, never with the password.
    line = f"dashboard sign-in of {creds.access_key} refused by"
    deadline = time.monotonic() + 15
    while not any(line in x for x in acl_dashboard.stderr) and time.monotonic() < deadline:
        time.sleep(0.1)
    log = "".join(acl_dashboard.stderr)
    assert line in log and creds.secret_key not in log
