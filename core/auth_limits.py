"""The user name and password length limits (in UTF-8 bytes), apart from core.auth
so the gateway's configuration can check them without importing argon2."""

from __future__ import annotations

MIN_USERNAME_BYTES, MAX_USERNAME_BYTES = 3, 50
MIN_PASSWORD_BYTES, MAX_PASSWORD_BYTES = 3, 100

__all__ = ["MAX_PASSWORD_BYTES", "MAX_USERNAME_BYTES", "MIN_PASSWORD_BYTES", "MIN_USERNAME_BYTES"]
