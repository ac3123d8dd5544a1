"""The dashboard's login (``rocketq dashboard --users FILE``): users with PBKDF2 password hashes and
a role (``admin`` may use every form, ``read-only`` only reads), server-side sessions behind an
HttpOnly, SameSite=Strict cookie (Secure over HTTPS), and a CSRF token in every form.

The users file is YAML::

    users:
    - username: alice
      password: pbkdf2_sha256$200000$<salt>$<hash>     # rocketq dashboard --hash-password
      role: admin
    - username: bob
      password: pbkdf2_sha256$200000$<salt>$<hash>
      role: read-only

Without ``--users`` the dashboard has no login, as before (and binds 127.0.0.1 unless told).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

import yaml
from aiohttp import web

from rocketq.dashboard.render import esc, page
from rocketq.errors import ConfigError

__all__ = ["DashboardUser", "Sessions", "Verifier", "auth_middleware", "hash_password", "load_users",
           "verify_password"]

Role = Literal["admin", "read-only"]
COOKIE: Final = "rocketq_session"
SESSION_IDLE: Final = 8 * 3600.0
ITERATIONS: Final = 200_000
_SCHEME: Final = "pbkdf2_sha256"
# Paths served without a session: the login itself and our two script files.
_OPEN: Final = frozenset({"/login", "/static/chart.js", "/static/tps.js"})
_FORM_OPEN: Final = re.compile(r'(<form\b[^>]*\bmethod="post"[^>]*>)', re.IGNORECASE)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def hash_password(password: str, *, iterations: int = ITERATIONS) -> str:
    """``pbkdf2_sha256$<iterations>$<salt>$<hash>`` for the users file."""
    salt = secrets.token_bytes(16)
    digest = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    return f"{_SCHEME}${iterations}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != _SCHEME:
            return False
        mine = hashlib.pbkdf2_hmac("sha256", password.encode(), _unb64(salt), int(iterations))
        return hmac.compare_digest(mine, _unb64(digest))
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class DashboardUser:
    username: str
    password_hash: str
    role: Role

    @property
    def can_change(self) -> bool:
        return self.role == "admin"


def load_users(path: str | Path) -> dict[str, DashboardUser]:
    """The users of a users file; ``ConfigError`` naming what is wrong (never a password)."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"dashboard users file {path}: {exc}") from None
    users: dict[str, DashboardUser] = {}
    for i, raw in enumerate((data or {}).get("users") or ()):
        name, stored, role = (raw or {}).get("username"), (raw or {}).get("password"), (raw or {}).get("role")
        if not name or not isinstance(name, str):
            raise ConfigError(f"dashboard users file {path}: user {i + 1} has no username")
        if not isinstance(stored, str) or not stored.startswith(_SCHEME + "$"):
            raise ConfigError(f"dashboard users file {path}: the password of {name} is not a "
                              f"{_SCHEME} hash (make one with: rocketq dashboard --hash-password)")
        if role not in ("admin", "read-only"):
            raise ConfigError(f"dashboard users file {path}: the role of {name} must be admin or read-only")
        users[name] = DashboardUser(name, stored, role)
    if not users:
        raise ConfigError(f"dashboard users file {path}: no users")
    return users


@dataclass(slots=True)
class Session:
    user: DashboardUser
    csrf: str
    expires: float


Verifier = Callable[[str, str], Awaitable["DashboardUser | None"]]


class Sessions:
    """Server-side sessions: the cookie holds only a random token. Users come from ``users`` (a
    users file) or, with ``verify``, from elsewhere (``--acl-users``: dashboard/acl_users.py)."""

    def __init__(self, users: dict[str, DashboardUser], idle: float = SESSION_IDLE, *,
                 verify: Verifier | None = None) -> None:
        self.users = users
        self.idle = idle
        self.verify = verify
        self._by_token: dict[str, Session] = {}

    async def login(self, username: str, password: str) -> str | None:
        if self.verify is not None:
            found = await self.verify(username, password)
        else:
            user = self.users.get(username)
            # A made-up hash keeps an unknown name as slow as a wrong password.
            ok = verify_password(password, user.password_hash if user else _DUMMY_HASH)
            found = user if ok else None
        if found is None:
            return None
        user = found
        self._expire()
        token = secrets.token_urlsafe(32)
        self._by_token[token] = Session(user, secrets.token_urlsafe(32), time.monotonic() + self.idle)
        return token

    def get(self, token: str | None) -> Session | None:
        if not token:
            return None
        session = self._by_token.get(token)
        if session is None or session.expires < time.monotonic():
            self._by_token.pop(token, None)
            return None
        session.expires = time.monotonic() + self.idle
        return session

    def logout(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, s in self._by_token.items() if s.expires < now]:
            del self._by_token[token]


_DUMMY_HASH: Final = f"{_SCHEME}${ITERATIONS}${_b64(b'0' * 16)}${_b64(b'0' * 32)}"

SESSIONS_KEY: web.AppKey[Sessions] = web.AppKey("sessions", Sessions)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _login_page(error: str | None = None, next_path: str = "/") -> str:
    body = (
        '<form method="post" action="/login" id="login">'
        f'<input type="hidden" name="next" value="{esc(next_path)}">'
        '<label>User <input name="username" autocomplete="username" required></label> '
        '<label>Password <input name="password" type="password" autocomplete="current-password" '
        'required></label> <button type="submit">Sign in</button></form>'
    )
    return page("Sign in", body, error=error)


def _safe_next(path: str | None) -> str:
    # Only a path of this server: never an open redirect to another site.
    if not path or not path.startswith("/") or path.startswith("//"):
        return "/"
    return path


def _html(text: str, status: int = 200) -> web.Response:
    return web.Response(text=text, status=status, content_type="text/html", charset="utf-8")


def _see_other(location: str) -> web.Response:
    # A plain response: aiohttp deprecates returning its HTTPException classes.
    return web.Response(status=303, headers={"Location": location})


async def _login(request: web.Request, sessions: Sessions) -> web.StreamResponse:
    if request.method != "POST":
        return _html(_login_page(next_path=_safe_next(request.query.get("next"))))
    form = await request.post()
    username, password = str(form.get("username", "")), str(form.get("password", ""))
    next_path = _safe_next(str(form.get("next", "/")))
    token = await sessions.login(username, password)
    if token is None:
        return _html(_login_page("Wrong user name or password.", next_path), 401)
    response = _see_other(next_path)
    response.set_cookie(COOKIE, token, httponly=True, samesite="Strict", secure=request.secure, path="/")
    return response


def _with_session(html: str, session: Session) -> str:
    """Every POST form of a page gets the session's CSRF token; the page says who is signed in."""
    token = f'<input type="hidden" name="csrf" value="{esc(session.csrf)}">'
    who = (f'<div id="who">signed in as {esc(session.user.username)} ({esc(session.user.role)}) '
           '<form method="post" action="/logout" style="display:inline">'
           '<button type="submit">Sign out</button></form></div>')
    html = html.replace("<body>", "<body>" + who, 1)
    return _FORM_OPEN.sub(lambda m: m.group(1) + token, html)


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    sessions = request.app[SESSIONS_KEY]
    if request.path == "/login":
        return await _login(request, sessions)
    if request.path in _OPEN:
        return await handler(request)
    token = request.cookies.get(COOKIE)
    session = sessions.get(token)
    if session is None:
        if request.path.startswith("/api/"):
            return web.json_response({"error": "sign in first"}, status=401)
        if request.method == "POST":
            return _html(_login_page("Your session ended: sign in again."), 401)
        return _see_other(f"/login?next={quote(request.path_qs, safe='/?=&')}")
    if request.method == "POST":
        form = await request.post()  # cached: the handler reads the same form
        if not hmac.compare_digest(str(form.get("csrf", "")), session.csrf):
            return _html(page("Refused", "", error="The form's CSRF token is missing or stale: reload "
                              "the page and try again."), 403)
        if request.path == "/logout":
            sessions.logout(token)
            signed_out = _see_other("/login")
            signed_out.del_cookie(COOKIE, path="/")
            return signed_out
        if not session.user.can_change:
            return _html(page("Refused", "", error=f"{session.user.username} is a read-only user: "
                              "nothing was changed."), 403)
    response = await handler(request)
    if isinstance(response, web.Response) and response.content_type == "text/html" and response.text:
        response.text = _with_session(response.text, session)
    return response
