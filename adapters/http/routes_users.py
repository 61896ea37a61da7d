"""Login, logout, token refresh, users and personal access tokens (iggy.md 10.2, 10.4).

Password checks and hashing (argon2id, core/auth.py) cost tens of
milliseconds of CPU, so they run in a worker thread through
:class:`~.handler.Offload`; everything else is quick and stays on the trio thread.
"""

from __future__ import annotations

from core.errors import NotFound
from core.permissions import Action

from . import models
from .errors import HttpError, not_found_entity
from .handler import App, Ctx, Offload, Route, empty, json_response
from .tokens import TokenError


def _raise_if_error(result: object) -> None:
    if isinstance(result, BaseException):
        raise result


def _identity(app: App, user):
    """The login answer: a token tied to this user (the ``ferry_uc`` claim)."""
    token, exp = app.tokens.issue(user.id, user_created_at=user.created_at)
    return json_response(models.identity_json(user.id, token, exp))


# -- sessions ----------------------------------------------------------------------------
def login(app: App, ctx: Ctx):
    f = ctx.fields()
    username, password = f.str("username"), f.str("password")
    f.str("version", required=False)  # accepted and ignored, as Iggy does
    f.str("context", required=False)

    def then(result):
        _raise_if_error(result)
        # The check ran in a worker thread: the user may have gone meanwhile.
        return _identity(app, app.broker.meta.users.recheck(result))

    return Offload(lambda: app.broker.meta.users.authenticate(username, password), then)


def logout(app: App, ctx: Ctx):
    app.tokens.revoke(ctx.claims)
    return empty()


def refresh(app: App, ctx: Ctx):
    token = ctx.fields().str("token")
    if not token:
        raise HttpError(401, 78, "empty token", "token")
    try:
        # The token's user must not have been deleted (app.user_of), or no trade.
        claims, new, exp = app.tokens.refresh(token, check=app.user_of)
    except TokenError as exc:
        # iggy.md 10.2: a used-up token answers 78, an invalid or expired one 40.
        raise HttpError(401, 78 if exc.revoked else 40, exc.reason, "token") from None
    return json_response(models.identity_json(claims.user_id, new, exp))


def pat_login(app: App, ctx: Ctx):
    return _identity(app, app.broker.meta.users.login_with_pat(ctx.fields().str("token")))


# -- users -------------------------------------------------------------------------------
def _user(app: App, ctx: Ctx):
    return app.broker.meta.users.get_user(ctx.ident("user_id"))


def get_users(app: App, ctx: Ctx):
    ctx.require(Action.READ_USERS)
    return json_response([models.user_json(u, False) for u in app.broker.meta.users.list_users()])


def get_user(app: App, ctx: Ctx):
    try:
        user = _user(app, ctx)
    except NotFound:
        raise not_found_entity() from None
    if user.id != ctx.user.id:
        ctx.require(Action.READ_USERS)
    return json_response(models.user_json(user, True))


def create_user(app: App, ctx: Ctx):
    ctx.require(Action.MANAGE_USERS)
    f = ctx.fields()
    username, password = f.str("username"), f.str("password")
    status = f.str("status", required=False) or "active"
    perms = models.permissions_from_json(f.obj.get("permissions"))
    users = app.broker.meta.users

    def then(result):
        _raise_if_error(result)
        return json_response(models.user_json(result, True))  # iggy.md 10.4: 200 UserInfoDetails

    return Offload(lambda: users.create_user(username, password, status, perms), then)


def update_user(app: App, ctx: Ctx):
    ctx.require(Action.MANAGE_USERS)
    user = _user(app, ctx)
    f = ctx.fields()
    app.broker.meta.users.update_user(user.id, username=f.str("username", required=False),
                                status=f.str("status", required=False))
    return empty()


def delete_user(app: App, ctx: Ctx):
    ctx.require(Action.MANAGE_USERS)
    app.broker.meta.users.delete_user(_user(app, ctx).id)
    return empty()


def update_permissions(app: App, ctx: Ctx):
    ctx.require(Action.MANAGE_USERS)
    user = _user(app, ctx)
    perms = models.permissions_from_json(ctx.fields().obj.get("permissions"))
    app.broker.meta.users.update_permissions(user.id, perms)
    return empty()


def change_password(app: App, ctx: Ctx):
    user = _user(app, ctx)
    if user.id != ctx.user.id:
        ctx.require(Action.MANAGE_USERS)
    f = ctx.fields()
    current, new = f.str("current_password"), f.str("new_password")
    users = app.broker.meta.users

    def then(result):
        _raise_if_error(result)
        return empty()

    return Offload(lambda: users.change_password(user.id, current, new), then)


# -- personal access tokens ----------------------------------------------------------------
def get_pats(app: App, ctx: Ctx):
    return json_response([models.pat_json(t) for t in app.broker.meta.users.list_pats(ctx.user.id)])


def create_pat(app: App, ctx: Ctx):
    f = ctx.fields()
    name = f.str("name")
    expiry = f.int("expiry", 0, models.U64_MAX, required=False)
    # iggy.md 10.4: 0 = server default, u64::MAX = never; our default is never,
    # and a lifetime past the i64 µs range (292 000 years) is never as well.
    expiry_us = None if expiry in (None, 0) or expiry > 2**63 - 1 else expiry
    token = app.broker.meta.users.create_pat(ctx.user.id, name, expiry_us)
    return json_response({"token": token})


def delete_pat(app: App, ctx: Ctx):
    app.broker.meta.users.delete_pat(ctx.user.id, ctx.params["name"])
    return empty()


ROUTES = [
    Route("POST", "/users/login", login, public=True, entity="user", command="user.login", body="Login",
          ok=(200, "IdentityInfo")),
    Route("POST", "/users/refresh-token", refresh, public=True, entity="user", body="Token",
          ok=(200, "IdentityInfo")),
    Route("DELETE", "/users/logout", logout, entity="user", command="user.logout", ok=(204, None)),
    Route("POST", "/personal-access-tokens/login", pat_login, public=True, entity="token", command="pat.login",
          body="Token", ok=(200, "IdentityInfo")),
    Route("GET", "/users", get_users, entity="user", command="user.list", ok=(200, "[UserInfo]")),
    Route("POST", "/users", create_user, entity="user", command="user.create", body="CreateUser",
          ok=(200, "UserInfoDetails")),
    Route("GET", "/users/{user_id}", get_user, entity="user", command="user.get", ok=(200, "UserInfoDetails")),
    Route("PUT", "/users/{user_id}", update_user, entity="user", command="user.update", body="UpdateUser",
          ok=(204, None)),
    Route("DELETE", "/users/{user_id}", delete_user, entity="user", command="user.delete", ok=(204, None)),
    Route("PUT", "/users/{user_id}/permissions", update_permissions, entity="user", command="user.permissions",
          body="UpdatePermissions", ok=(204, None)),
    Route("PUT", "/users/{user_id}/password", change_password, entity="user", command="user.password",
          body="ChangePassword", ok=(204, None)),
    Route("GET", "/personal-access-tokens", get_pats, entity="token", command="pat.list",
          ok=(200, "[PersonalAccessTokenInfo]")),
    Route("POST", "/personal-access-tokens", create_pat, entity="token", command="pat.create",
          body="CreatePersonalAccessToken", ok=(200, "RawPersonalAccessToken")),
    Route("DELETE", "/personal-access-tokens/{name}", delete_pat, entity="token", command="pat.delete",
          ok=(204, None)),
]

__all__ = ["ROUTES"]
