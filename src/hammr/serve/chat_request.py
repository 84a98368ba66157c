"""What an OpenAI chat-completions request asks of hammr: the question, its images, how to
answer; and the OpenAI-style error every refusal is.

The question is the text of the last user message and the images are that message's
``image_url`` parts (``data:`` URLs; ``http(s)`` URLs only where the server allows them, see
:mod:`hammr.serve.image_source`): one image is the variable ``image``, a second ``image2``
(two-image questions). Sampling settings (``temperature``, ``max_tokens``, ...) are the
agent's own business and are ignored; ``n`` other than 1 and tool calling are refused.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hammr.text_limits import question_problem

MAX_IMAGES = 2
"""A question is about one image, or two (``image`` and ``image2``)."""


class OpenAIError(Exception):
    """A refusal in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def bad_request(message: str, param: str | None = None, code: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


@dataclass(frozen=True)
class ImageRef:
    """One ``image_url`` part: where the image is, and where in the request it was."""

    url: str
    param: str
    """e.g. ``messages[1].content[2].image_url``, for error messages."""


@dataclass(frozen=True)
class ChatQuestion:
    model: str
    question: str
    images: tuple[ImageRef, ...]
    stream: bool = False
    include_usage: bool = False
    """``stream_options.include_usage``: a last chunk with the usage and no choices."""
    steps: bool = False
    """``hammr_steps: true``: stream each agent step in the chunks' ``hammr`` field."""
    user: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object, or a 400 saying what is wrong with it."""
    try:
        body = json.loads(raw)
    except UnicodeDecodeError:
        raise bad_request("the request body is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise bad_request(
            f"the request body is not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})"
        ) from None
    except RecursionError:
        raise bad_request("the request body is nested too deep") from None
    if not isinstance(body, dict):
        raise bad_request(f"the request body must be a JSON object, got {type(body).__name__}")
    return body


def _is_true(body: Mapping[str, Any], key: str) -> bool:
    value = body.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise bad_request(f"'{key}' must be true or false", param=key)
    return value


def read_chat(body: Mapping[str, Any]) -> ChatQuestion:
    """The question a chat-completions body asks (OpenAIError 400 for anything malformed)."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise bad_request("'model' is required: the hammr system to ask (GET /v1/models)", "model")
    n = body.get("n", 1)
    if n not in (1, None):
        raise bad_request("'n' must be 1: a hammr system gives one answer per question", "n")
    if body.get("tools") or body.get("functions"):
        raise bad_request(
            "tool calling is not offered: a hammr system calls its own tools; send the "
            "question and its image",
            "tools",
        )
    stream = _is_true(body, "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, Mapping):
        raise bad_request("'stream_options' must be an object", "stream_options")
    include_usage = options.get("include_usage", False) is True
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("'messages' must be a non-empty list", "messages")
    index = _last_user(messages)
    text, images = _content(messages[index], f"messages[{index}]")
    if not text.strip():
        raise bad_request(
            f"messages[{index}] (the last user message) has no text: it must hold the question",
            f"messages[{index}].content",
        )
    problem = question_problem(text)
    if problem is not None:
        raise bad_request(problem, f"messages[{index}].content")
    if not images:
        raise bad_request(
            f"messages[{index}] (the last user message) has no image: hammr answers questions "
            "about an image; add an image_url part (a data: URL)",
            f"messages[{index}].content",
            "image_missing",
        )
    if len(images) > MAX_IMAGES:
        raise bad_request(
            f"messages[{index}] has {len(images)} images; a question is about one image or two",
            f"messages[{index}].content",
        )
    user = body.get("user")
    return ChatQuestion(
        model=model.strip(),
        question=text.strip(),
        images=tuple(images),
        stream=stream,
        include_usage=include_usage,
        steps=_is_true(body, "hammr_steps"),
        user=user if isinstance(user, str) else "",
    )


def _last_user(messages: Sequence[Any]) -> int:
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, Mapping):
            raise bad_request(f"messages[{i}] must be an object with 'role' and 'content'")
        if m.get("role") == "user":
            return i
    raise bad_request("'messages' holds no user message: the question goes in one", "messages")


def _content(message: Mapping[str, Any], where: str) -> tuple[str, list[ImageRef]]:
    content = message.get("content")
    if isinstance(content, str):
        return content, []
    if not isinstance(content, list):
        raise bad_request(f"{where}.content must be a string or a list of parts", where)
    texts: list[str] = []
    images: list[ImageRef] = []
    for j, part in enumerate(content):
        at = f"{where}.content[{j}]"
        if not isinstance(part, Mapping):
            raise bad_request(f"{at} must be an object with a 'type'", at)
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise bad_request(f"{at}.text must be a string", f"{at}.text")
            texts.append(text)
        elif kind == "image_url":
            ref = part.get("image_url")
            url = ref.get("url") if isinstance(ref, Mapping) else ref
            if not isinstance(url, str) or not url:
                raise bad_request(f"{at}.image_url.url must be a URL string", f"{at}.image_url")
            images.append(ImageRef(url, f"{at}.image_url"))
        else:
            raise bad_request(
                f"{at} has type {str(kind)[:40]!r}; hammr reads 'text' and 'image_url' parts", at
            )
    return "\n".join(t for t in texts if t.strip()), images
