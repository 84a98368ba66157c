"""Playwright with the system's Chromium (never a downloaded browser), or why a browser test
cannot run here: one place for every viewer test file."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")

try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    Page = None  # type: ignore[assignment,misc]
    sync_playwright = None  # type: ignore[assignment]

MISSING = (
    "playwright is not installed (pip install playwright)"
    if sync_playwright is None
    else f"{CHROMIUM} is missing (apt-get install chromium)"
    if not CHROMIUM.exists()
    else None
)


def needs_browser(module: str) -> pytest.MarkDecorator:
    """The skip mark of a browser test module, saying why (printed too, so CI logs show it)."""
    if MISSING:
        print(f"{module} skipped: {MISSING}")
    return pytest.mark.skipif(MISSING is not None, reason=MISSING or "")


__all__ = ["CHROMIUM", "MISSING", "Page", "needs_browser", "sync_playwright"]
