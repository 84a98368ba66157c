"""The plumbing of a client of an OpenAI-style server over httpx.

- :class:`OpenAIStyleClient`, the base of the LLM client
  (:mod:`hammr.backends.llm.openai_compat`) and the embeddings client
  (:mod:`hammr.backends.embed.openai_embeddings`): the connection settings, an httpx client
  per event loop, closing it, the backoff between tries, and the reading of one try's
  outcome (a reply to use, a failure worth trying again, or an error of the client's own
  type for a 4xx), in the words every message of theirs uses;
- :class:`PerLoopSemaphore` and :func:`gather_all`, for the clients that send many requests
  at once (the embeddings client, the served VLM of :mod:`hammr.backends.vlm`).
"""

from __future__ import annotations

import asyncio
import os
import random
import ssl
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import httpx

from hammr.backends.http_replies import (
    CLOSED_EARLY,
    closed_early,
    excerpt,
    network_reason,
    retry_after_s,
    server_message,
    tls_context,
)
from hammr.backends.llm.slots import Lane, current_lane

T = TypeVar("T")


@dataclass(frozen=True)
class Failed:
    """One try that failed in a way worth trying again."""

    message: str
    """The error's text, should no try be left."""
    retry_after: float | None = None
    """The seconds the server asked us to wait (its Retry-After header), if it did."""
    unreachable: str | None = None
    """Why the server could not be reached (refused, timed out, dropped), in a few words;
    None when it answered."""


class OpenAIStyleClient:
    """The base of a client of an OpenAI-style server: see the module doc.

    ``max_retries`` is the number of tries in all; between tries the client waits
    ``backoff_s`` doubled each time, with jitter, or what a ``Retry-After`` header asks for,
    up to ``max_retry_after_s``.
    """

    error_type: ClassVar[type[Exception]]
    """The error a failure raises (each client has its own)."""
    server_label: str
    """What messages call the server: 'the {server_label} at {url} ...'."""
    config_table: str
    """The hammr.toml table that messages point to."""

    # The words in which the clients' messages differ, each kept as it has always been:
    _unreachable_says_tries: ClassVar[bool] = True
    """Whether 'cannot reach ...' says how many tries were made."""
    _no_key_env_advice: ClassVar[str] = "set api_key_env in hammr.toml [{table}]"
    """What a 401 or 403 advises when no api_key_env is set ({table}: the config table)."""

    def __init__(
        self,
        urls: Sequence[str],
        model: str,
        *,
        api_key_env: str | None,
        timeout_s: float,
        max_retries: int,
        backoff_s: float,
        max_retry_after_s: float,
    ) -> None:
        self.model = model
        self.api_key_env = api_key_env
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.timeout_s = float(timeout_s)
        self.max_retries = max(1, int(max_retries))
        self.backoff_s = float(backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        # Plain http never does TLS (redirects are not followed), so skip the CA bundle.
        self._https = any(u.startswith("https:") for u in urls)
        self._clients: dict[Lane | None, httpx.AsyncClient] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- the connection --------------------------------------------------------------------

    def _client_for_loop(self) -> httpx.AsyncClient:
        """The HTTP client of the running loop and of the question's lane (one per lane).

        An AsyncClient is bound to the loop it first ran on; the CLI may call asyncio.run
        several times, so fresh ones are made whenever the loop changes. One client per lane
        (:mod:`hammr.backends.llm.slots`): httpcore looks over every connection of its pool
        at each request's start and end, so one pool of 32 connections cost 1.0 ms of CPU a
        request where 32 pools of one cost 0.6 (benchmarks/eval_throughput.py)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            self._clients = {}  # made on a loop that has ended: dropped
            self._loop = loop
        lane = current_lane()
        client = self._clients.get(lane)
        if client is None or client.is_closed:
            headers = {"Content-Type": "application/json"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            verify: ssl.SSLContext | bool = tls_context() if self._https else False
            client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s), headers=headers, verify=verify
            )
            self._clients[lane] = client
        return client

    async def aclose(self) -> None:
        """Close the clients if they were made on the loop running now (those made on a loop
        that has ended cannot be closed from this one, and are dropped)."""
        clients, self._clients = self._clients, {}
        loop, self._loop = self._loop, None
        if loop is asyncio.get_running_loop():
            for client in clients.values():
                if not client.is_closed:
                    await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- tries -----------------------------------------------------------------------------

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """The seconds to wait after the failed try ``attempt`` (0 for the first)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after_s)
        return float(self.backoff_s * (2**attempt) * random.uniform(0.5, 1.0))

    def _tries(self) -> str:
        n = self.max_retries
        return f"{n} {'try' if n == 1 else 'tries'}"

    def _answered(self, url: str) -> None:
        """Called when the server at ``url`` answered, whatever it said."""

    async def _attempt(
        self, client: httpx.AsyncClient, endpoint: str, body: dict[str, Any], url: str
    ) -> httpx.Response | Failed:
        """One try: POST ``body`` to ``endpoint`` of the server at ``url`` (the URL messages
        name). The reply when it is a success; a :class:`Failed` when the try is worth
        repeating (a timeout, a connection that failed, HTTP 429 or 5xx); raises
        :attr:`error_type` for another 4xx."""
        where = self._where(url)
        try:
            resp = await client.post(endpoint, json=body)
        except httpx.TimeoutException:
            return Failed(
                f"{where} did not answer within {self.timeout_s:g} s ({self._tries()}); "
                "is it overloaded, or is the model still loading?",
                unreachable=f"no answer within {self.timeout_s:g} s",
            )
        except httpx.ConnectError as e:
            reason = network_reason(e)
            tries = f" ({self._tries()})" if self._unreachable_says_tries else ""
            return Failed(
                f"cannot reach {where}: {reason}{tries} — is it running? {self._config_hint()}",
                unreachable=reason,
            )
        except httpx.TransportError as e:
            if closed_early(e):
                return Failed(
                    f"{where} closed the connection before its reply was complete "
                    f"({self._tries()}) — did the server crash or restart?",
                    unreachable=CLOSED_EARLY,
                )
            reason = network_reason(e)
            return Failed(
                f"the connection to {where} failed ({self._tries()}): {reason}",
                unreachable=reason,
            )
        self._answered(url)
        status = resp.status_code
        if status == 429 or status >= 500:
            what = "is rate-limiting requests" if status == 429 else "failed"
            return Failed(
                f"{where} {what} (HTTP {status}, {self._tries()}): {server_message(resp)}",
                retry_after=retry_after_s(resp),
            )
        if status >= 400:
            raise self._client_error(resp, url, body)
        return resp

    def _reply_json(self, resp: httpx.Response, url: str) -> Any:
        """The JSON of a successful reply from the server at ``url``; raises
        :attr:`error_type` when it is not JSON."""
        try:
            return resp.json()
        except (ValueError, UnicodeDecodeError):
            raise self.error_type(
                f"{self._where(url)} sent a reply that is not JSON: {excerpt(resp.text)!r}"
            ) from None

    # -- messages --------------------------------------------------------------------------

    def _where(self, url: str) -> str:
        return f"the {self.server_label} at {url}"

    def _config_hint(self) -> str:
        return f"(hammr.toml [{self.config_table}] base_url)"

    def _request_text(self, url: str, status: int) -> str:
        """What a 404 (``status``) or another refusal says of the request, after 'answered
        404' or 'refused the request'."""
        return f" for model {self.model!r}"

    def _client_error(
        self, resp: httpx.Response, url: str, body: dict[str, Any] | None = None
    ) -> Exception:
        """The error for a 4xx reply other than 429 (a request that will not do better) to
        the request ``body``."""
        status = resp.status_code
        msg = server_message(resp)
        where = self._where(url)
        if status in (401, 403):
            if self.api_key_env is None:
                how = self._no_key_env_advice.format(table=self.config_table)
            elif self.api_key:
                how = f"check the key in {self.api_key_env}"
            else:
                how = f"set {self.api_key_env} to a valid key; it is not set now"
            return self.error_type(f"{where} rejected the API key (HTTP {status}; {how}): {msg}")
        if status == 404:
            return self.error_type(
                f"{where} answered 404{self._request_text(url, status)}: {msg} (check "
                f"hammr.toml [{self.config_table}] model, and that base_url ends in /v1)"
            )
        return self.error_type(
            f"{where} refused the request{self._request_text(url, status)} (HTTP {status}): {msg}"
        )


class PerLoopSemaphore:
    """A semaphore for the event loop running now: an :class:`asyncio.Semaphore` belongs to
    one loop, and the CLI may run several loops in turn."""

    def __init__(self) -> None:
        self._semaphore: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def current(self, value: int) -> asyncio.Semaphore:
        """The running loop's semaphore, made with ``value`` on the loop's first call."""
        loop = asyncio.get_running_loop()
        if self._semaphore is None or self._loop is not loop:
            self._semaphore = asyncio.Semaphore(value)
            self._loop = loop
        return self._semaphore


async def gather_all(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Await every call concurrently, results in order; on the first failure cancel the rest
    and raise it."""
    tasks = [asyncio.ensure_future(c) for c in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for t in tasks:
            t.cancel()
        raise
