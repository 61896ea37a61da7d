"""``GET /options/{scope}``: the option catalog over HTTP (the current Iggy server's
route, apache/iggy core/server/src/http.rs and http/handlers.rs ``describe_options``).

The same catalog as the binary DescribeOptions (adapters/iggy/options.py): a JSON
array of ``{"key", "kind", "default_value", "description"}``, the kind by its
snake-case name, the default as the byte array of its canonical encoding (serde's
form of ``OptionSpec``). Scopes ``topic``, ``stream`` and ``user`` (the last two have
no keys: ``[]``); any other is 400 id 3 ``invalid_command``. Any logged-in user may
read it (the reference gates it on authentication only).
"""

from __future__ import annotations

from adapters.iggy import options
from core.message import HeaderKind

from .errors import HttpError
from .handler import App, Ctx, Route, json_response
from .schemas import SCHEMAS, U32, obj

# The component schema of one entry, for /openapi.json (kept with its route).
SCHEMAS.setdefault("OptionSpec", obj({
    "key": {"type": "string", "minLength": 1, "maxLength": 255},
    "kind": {"enum": [kind.json_name for kind in HeaderKind]},
    "default_value": {"type": "array", "items": {**U32, "maximum": 255}},
    "description": {"type": "string"},
}, ("key", "kind", "default_value", "description")))


def describe_options(app: App, ctx: Ctx):
    scope = options.SCOPES.get(ctx.params["scope"])
    if scope is None:
        raise HttpError.iggy(3, f"scope: unknown option scope {ctx.params['scope'][:64]!r}", "scope")
    return json_response([spec.to_json() for spec in options.describe(app.broker, scope)])


ROUTES = [
    Route("GET", "/options/{scope}", describe_options, command="system.describe_options", ok=(200, "[OptionSpec]")),
]

__all__ = ["ROUTES"]
