"""One GET returning JSON, with one-line errors for the agent (shared by the web backends)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from hammr.backends.http_errors import connect_reason, one_line
from hammr.tools.base import ToolError


def _server_error(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return one_line(resp.text)
    if isinstance(data, dict):
        for key in ("error", "message", "detail"):
            if isinstance(data.get(key), str):
                return one_line(data[key])
    return one_line(resp.text)


_REASONS = (("host name not found", ("name or service not known", "name resolution")),)


def _connect_reason(exc: Exception) -> str:
    return connect_reason(exc, _REASONS, limit=100)


async def get_json(
    service: str,
    url: str,
    params: Mapping[str, str | int],
    timeout_s: float,
    hints: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """GET ``url`` and return its JSON object; every failure is a one-line ToolError.

    ``service`` names the backend in messages (never the full URL: it may hold an API key);
    ``hints`` adds advice for particular HTTP statuses.
    """
    try:
        async with httpx.AsyncClient(timeout=httpx.Timeout(timeout_s)) as client:
            resp = await client.get(
                url, params=dict(params), headers={"Accept": "application/json"}
            )
    except httpx.TimeoutException:
        raise ToolError(f"web search: {service} did not answer within {timeout_s:g} s") from None
    except httpx.HTTPError as e:
        raise ToolError(f"web search: {service} is unreachable ({_connect_reason(e)})") from None
    if resp.status_code >= 400:
        hint = (hints or {}).get(resp.status_code, "")
        detail = _server_error(resp)
        text = f"web search: {service} answered HTTP {resp.status_code}"
        text += f": {detail}" if detail else ""
        text += f" ({hint})" if hint else ""
        raise ToolError(text)
    try:
        data = resp.json()
    except ValueError:
        raise ToolError(
            f"web search: {service} replied with something that is not JSON: "
            f"{one_line(resp.text, 80) or '(empty reply)'}"
        ) from None
    if not isinstance(data, dict):
        raise ToolError(f"web search: {service} replied with JSON that is not an object")
    return data


def text_field(item: Mapping[str, Any], *keys: str) -> str:
    """The first non-empty string among ``keys`` of a result, stripped ('' when none)."""
    for k in keys:
        v = item.get(k)
        if isinstance(v, str) and v.strip():
            return v.strip()
    return ""
