"""The browser page served at ``/``: the web console (adapters/http/console/).

It calls the same JSON API as any client, plus the few console endpoints of
routes_console.py: log in (or take ``#token=...`` from the URL fragment, which never
reaches the server's logs; ``&stream=S&topic=T`` opens that topic's messages), then an
overview of per-listener rates, streams/topics/partitions with consumer-group lag, a
message browser and user/token administration. All data is inserted with
``textContent``, never as HTML, so a message cannot inject markup. No build step, no
external assets; the Content-Security-Policy allows only this origin's own files and
fetches (no inline script at all).
"""

from __future__ import annotations

from .console import CSP, INDEX as PAGE

__all__ = ["CSP", "PAGE"]
