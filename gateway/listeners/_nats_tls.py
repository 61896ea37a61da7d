"""TLS settings shared by the NATS listeners (``nats`` and ``nats_ws``): files in, SSLContext out."""

from __future__ import annotations

import ssl

from core.errors import InvalidArgument


def server_ssl_context(listener: str, cert: str, key: str, ca: str = "", verify: bool = False
                       ) -> ssl.SSLContext | None:
    """A server context from PEM files, or None when no certificate is set.

    ``verify`` requires and checks client certificates against ``ca``
    (nats-server's ``--tlsverify`` with ``--tlscacert``). Raises
    InvalidArgument naming the option when the files are missing or unusable."""
    if not cert and not key:
        if verify or ca:
            raise InvalidArgument(f"listeners.{listener}: tls_ca/tls_verify need tls_cert and tls_key")
        return None
    if not (cert and key):
        raise InvalidArgument(f"listeners.{listener}: tls_cert and tls_key go together")
    if verify and not ca:
        raise InvalidArgument(f"listeners.{listener}: tls_verify needs tls_ca (the CA that signs client certs)")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # nats-server's default minimum is TLS 1.2 (server/opts.go, tls.VersionTLS12).
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        ctx.load_cert_chain(cert, key)
        if ca:
            ctx.load_verify_locations(ca)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(f"listeners.{listener}: cannot load TLS files: {exc}") from None
    ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    return ctx
