"""The TLS server context of the listeners that wrap the whole TCP stream from its
first byte (``iggy_tcp``, ``iggy_ws``, ``kafka``): PEM files in, ``ssl.SSLContext`` out.

Not shared with the NATS listeners (``_nats_tls.py``: tls_cert and tls_key go
together, client certificates with tls_ca/tls_verify, nats-server's wording) nor
with HTTP (adapters/http/driver.py ``make_ssl_context``: ALPN for h2): those build
a different context on purpose.
"""

from __future__ import annotations

import ssl

from ..config import ConfigError


def server_ssl_context(cert: str, key: str, listener: str) -> ssl.SSLContext:
    """A TLS server context for ``listeners.<listener>``: TLS 1.2 or newer, no
    client certificates (clients authenticate with the protocol's own login:
    Iggy's LoginUser, Kafka's SASL). ``key`` may be empty when the key is in
    ``cert``'s file.

    Raises ConfigError naming the option when the files are missing or
    unusable: ``ferry serve`` stops with one line and exit code 2, as for any
    other bad setting (gateway/cli/exits.py). ``ferry config check`` does not
    open the files."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # Kafka's default ssl.enabled.protocols is TLSv1.2,TLSv1.3 (SslConfigs); Iggy's
    # rustls speaks no older version either. Nothing older is worth a downgrade path.
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key or None)
    except OSError as exc:  # ssl.SSLError is an OSError: a key that does not match, not PEM
        raise ConfigError(f"listeners.{listener}.tls_cert = {cert!r}: cannot load tls_cert/tls_key: {exc}",
                          key=f"listeners.{listener}.tls_cert", value=cert) from None
    return ctx


def tls_options(opts: dict, listener: str) -> ssl.SSLContext | None:
    """The context the ``tls_cert``/``tls_key`` options of ``listeners.<listener>`` ask
    for, or None (plaintext) when tls_cert is empty. A tls_key without a tls_cert is
    refused rather than silently serving plaintext."""
    cert, key = str(opts.get("tls_cert") or ""), str(opts.get("tls_key") or "")
    if key and not cert:
        raise ConfigError(f"listeners.{listener}: tls_key needs tls_cert", key=f"listeners.{listener}.tls_key",
                          value=key)
    return server_ssl_context(cert, key, listener) if cert else None


__all__ = ["server_ssl_context", "tls_options"]
