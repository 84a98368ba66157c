"""The images of a served question: ``data:`` URLs always, ``http(s)`` URLs only when the
server was started with ``--allow-image-urls``.

A ``data:`` URL must hold an image, of the type it says (:mod:`hammr.data_url`, the reader
`hammr mcp` uses too). An ``http(s)`` URL is
fetched with a size and a time limit, a bounded number of redirects, and never from a
private, loopback, link-local or otherwise non-public address: every address the name
resolves to is checked at every hop, and the connection is made to the checked address (the
name is kept for the ``Host`` header and TLS), so a name that resolves differently a moment
later (DNS rebinding) cannot lead the server to an address it refused. Every image is decoded
under hammr's pixel limit (a decompression bomb is refused before it is decoded).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from hammr.data_url import DataUrlError, decode_image, read_data_url, too_large
from hammr.serve.chat_request import ImageRef, OpenAIError, bad_request
from hammr.values import DEFAULT_MAX_PIXELS, Image

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
INLINE_DECODE_BYTES = 64 * 1024
USER_AGENT = "hammr-serve (image fetch for a served question)"


def public_address(ip: IPAddress) -> bool:
    """Whether ``ip`` is a public unicast address (not private, loopback, link-local,
    shared, reserved or multicast; an IPv4 address mapped into IPv6 is judged as IPv4)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


@dataclass(frozen=True)
class ImagePolicy:
    """What the server accepts as an image."""

    allow_urls: bool = False
    max_bytes: int = 20 * 1024 * 1024
    timeout_s: float = 10.0
    """For one URL, redirects included."""
    max_redirects: int = 3
    max_pixels: int = DEFAULT_MAX_PIXELS
    address_ok: Callable[[IPAddress], bool] = field(default=public_address)
    """Which resolved addresses may be fetched from (tests widen it to 127.0.0.1)."""


async def load_image(ref: ImageRef, policy: ImagePolicy) -> Image:
    """The image ``ref`` names, decoded; OpenAIError 400 saying why not."""
    scheme = ref.url.split(":", 1)[0].lower() if ":" in ref.url else ""
    if scheme == "data":
        try:
            data, declared = read_data_url(ref.url, ref.param, max_bytes=policy.max_bytes)
        except DataUrlError as e:
            raise _refusal(e, ref) from None
    elif scheme in ("http", "https"):
        if not policy.allow_urls:
            raise bad_request(
                "image URLs are not fetched by this server: send the image as a data: URL "
                "(data:image/png;base64,...), or start it with --allow-image-urls",
                ref.param,
                "image_url_not_allowed",
            )
        data, declared = await fetch_image(ref, policy)
    else:
        raise bad_request(
            f"{ref.param}: a {scheme or 'relative'!s} URL is not an image hammr can read; "
            "send a data: URL",
            ref.param,
        )
    if len(data) <= INLINE_DECODE_BYTES:  # a thread costs more than decoding a small image
        return _decode(data, declared, ref, policy.max_pixels)
    return await asyncio.to_thread(_decode, data, declared, ref, policy.max_pixels)


def _too_big(ref: ImageRef, max_bytes: int) -> OpenAIError:
    return _refusal(too_large(ref.param, max_bytes), ref)


_CODES = {
    "malformed": "bad_data_url",
    "not_an_image": "not_an_image",
    "type_mismatch": "image_type_mismatch",
    "too_large": "image_too_large",
    "bad_image": "bad_image",
}


def _refusal(e: DataUrlError, ref: ImageRef) -> OpenAIError:
    return OpenAIError(
        413 if e.code == "too_large" else 400, str(e), param=ref.param, code=_CODES[e.code]
    )


def _decode(data: bytes, declared: str, ref: ImageRef, max_pixels: int) -> Image:
    try:
        return decode_image(data, declared, ref.param, max_pixels=max_pixels)
    except DataUrlError as e:
        raise _refusal(e, ref) from None


async def fetch_image(ref: ImageRef, policy: ImagePolicy) -> tuple[bytes, str]:
    """The bytes at an ``http(s)`` URL and its declared media type, under the policy."""
    try:
        async with asyncio.timeout(policy.timeout_s):
            return await _fetch(ref, policy)
    except TimeoutError:
        raise bad_request(
            f"{ref.param}: the image URL did not deliver its image within {policy.timeout_s:g} s",
            ref.param,
            "image_url_timeout",
        ) from None


async def _fetch(ref: ImageRef, policy: ImagePolicy) -> tuple[bytes, str]:
    url = ref.url
    async with httpx.AsyncClient(follow_redirects=False, trust_env=False) as client:
        for _hop in range(policy.max_redirects + 1):
            target, headers, extensions = await _pinned(url, ref, policy)
            try:
                async with client.stream(
                    "GET", target, headers=headers, extensions=extensions
                ) as reply:
                    if reply.is_redirect:
                        location = reply.headers.get("location", "")
                        if not location:
                            raise bad_request(
                                f"{ref.param}: a redirect with no Location", ref.param
                            )
                        url = urllib.parse.urljoin(url, location)
                        continue
                    if reply.status_code != 200:
                        raise bad_request(
                            f"{ref.param}: the image URL answered HTTP {reply.status_code}",
                            ref.param,
                            "image_url_failed",
                        )
                    declared = reply.headers.get("content-type", "").split(";")[0].strip().lower()
                    size = reply.headers.get("content-length", "")
                    if size.isdigit() and int(size) > policy.max_bytes:
                        raise _too_big(ref, policy.max_bytes)
                    chunks: list[bytes] = []
                    total = 0
                    async for chunk in reply.aiter_bytes():
                        total += len(chunk)
                        if total > policy.max_bytes:
                            raise _too_big(ref, policy.max_bytes)
                        chunks.append(chunk)
                    if declared.startswith("text/") or declared.startswith("application/json"):
                        raise bad_request(
                            f"{ref.param}: the image URL sent {declared}, not an image",
                            ref.param,
                            "not_an_image",
                        )
                    return b"".join(chunks), declared if declared.startswith("image/") else ""
            except httpx.HTTPError as e:
                raise bad_request(
                    f"{ref.param}: the image URL could not be fetched ({type(e).__name__})",
                    ref.param,
                    "image_url_failed",
                ) from None
    raise bad_request(
        f"{ref.param}: the image URL redirected more than {policy.max_redirects} times",
        ref.param,
        "image_url_failed",
    )


async def _pinned(
    url: str, ref: ImageRef, policy: ImagePolicy
) -> tuple[httpx.URL, dict[str, str], dict[str, object]]:
    """The request for ``url`` made to an address its host resolves to, every one of which
    the policy allows: (URL with the address, headers, httpx extensions)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise bad_request(f"{ref.param}: not a valid URL", ref.param) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise bad_request(f"{ref.param}: only http(s) URLs with a host are fetched", ref.param)
    host = parsed.host
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        literal: IPAddress | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        addresses = [literal]
    else:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror:
            raise bad_request(
                f"{ref.param}: the image URL's host {host[:80]!r} does not resolve",
                ref.param,
                "image_url_failed",
            ) from None
        addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    refused = [a for a in addresses if not policy.address_ok(a)]
    if refused or not addresses:
        raise bad_request(
            f"{ref.param}: the image URL's host {host[:80]!r} is at a private or local address "
            f"({refused[0] if refused else 'none'}); only public addresses are fetched",
            ref.param,
            "image_url_private",
        )
    shown = f"{host}:{parsed.port}" if parsed.port else host
    headers = {"Host": shown, "User-Agent": USER_AGENT, "Accept": "image/*"}
    extensions: dict[str, object] = {"sni_hostname": host} if parsed.scheme == "https" else {}
    return parsed.copy_with(host=str(addresses[0])), headers, extensions
