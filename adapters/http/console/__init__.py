"""The web console's static files: ``index.html`` (served at ``/``) and the assets under ``/console/``.

Plain files, no build step: ``app.js`` (views, API calls), ``chart.js`` (a small SVG line
chart), ``console.css``. They are read once, at import, through importlib.resources, so
they load from a wheel as from a checkout; a missing file fails the import rather than
the first browser that asks. The package-data rule that ships them is in docs/http.md
("Web console").

The Content-Security-Policy allows scripts, styles and fetches from this origin only: no
inline script or style attribute, no CDN, no frames, no form posts elsewhere.
"""

from __future__ import annotations

from importlib.resources import files

CSP = (b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'")

_TYPES = {".js": b"text/javascript; charset=utf-8", ".css": b"text/css; charset=utf-8"}
_HERE = files(__package__)

INDEX = _HERE.joinpath("index.html").read_text(encoding="utf-8")
# name -> (content type, body); only these names are served, nothing is looked up by path.
ASSETS: dict[str, tuple[bytes, bytes]] = {
    name: (_TYPES[name[name.rfind("."):]], _HERE.joinpath(name).read_bytes())
    for name in ("app.js", "chart.js", "console.css", "connections.js", "errors.js", "consumers.js",
                 "jetstream.js", "messages.js")
}

__all__ = ["ASSETS", "CSP", "INDEX"]
