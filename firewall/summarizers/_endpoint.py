"""Where a vendor SDK sends its requests, with which key, and what the audit calls it.

The SDKs read their base URL (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``) and their key
(``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``, ...) from the environment independently, so a base
URL pointing at another server would receive the vendor's key. Here the key the SDK would find
in the environment goes to the vendor's own host over TLS only; anywhere else the client is
given ``PLACEHOLDER_KEY`` (which local servers ignore) unless the caller passed a credential.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

ANTHROPIC_HOST = "api.anthropic.com"
OPENAI_HOST = "api.openai.com"
PLACEHOLDER_KEY = "not-needed"


def is_official(base_url: Any, host: str) -> bool:
    """Whether ``base_url`` is the vendor's own API (``host``), over TLS on the default port."""
    try:
        parts = urlsplit(str(base_url))
        return parts.scheme == "https" and parts.hostname == host and parts.port in (None, 443)
    except ValueError:  # a port that is not a number: not the vendor
        return False


def host_of(base_url: Any) -> str:
    """``host[:port]`` of a base URL, without any user name or password in it."""
    try:
        parts = urlsplit(str(base_url))
        port = parts.port
    except ValueError:
        return "?"
    return (parts.hostname or "?") + (f":{port}" if port else "")


def pin_endpoint(client_kwargs: dict[str, Any], *, env: str, host: str,
                 credentials: tuple[str, ...] = ("api_key",)) -> dict[str, Any]:
    """Fix the base URL the client will use (``client_kwargs`` or the ``env`` variable) and,
    when it is not ``host`` and none of ``credentials`` was given, the placeholder key: an
    explicit credential stops the SDK from reading the environment's. Changes ``client_kwargs``
    in place and returns it."""
    base_url = client_kwargs.get("base_url") or os.environ.get(env) or None
    if base_url is not None:
        client_kwargs["base_url"] = base_url
        given = any(client_kwargs.get(name) is not None for name in credentials)
        if not given and not is_official(base_url, host):
            client_kwargs["api_key"] = PLACEHOLDER_KEY
    return client_kwargs


def vendor_path(vendor: str, model: str, base_url: Any, host: str) -> str:
    """The audit's name for a summarizer: ``anthropic:MODEL``, ``openai:MODEL``, or
    ``openai-compatible:MODEL@HOST`` when the client talks to another server."""
    if base_url is None or is_official(base_url, host):
        return f"{vendor}:{model}"
    return f"{vendor}-compatible:{model}@{host_of(base_url)}"


def client_base_url(client: Any, client_kwargs: dict[str, Any]) -> Any:
    """The base URL of the client in use, else of the one ``client_kwargs`` will build."""
    if client is not None:
        return getattr(client, "base_url", None)
    return client_kwargs.get("base_url")
