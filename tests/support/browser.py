"""Debian's chromium, headless, driven through playwright, as the browser tests use it; and
where they leave their screenshots."""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import BrowserContext, ViewportSize, async_playwright

from tests.support.server import ROOT
from tests.support.tools import need_command

ARTIFACTS = ROOT / "tests" / "artifacts"
# The network is closed here: without these, chromium stalls on its background services.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
LAPTOP: ViewportSize = {"width": 1366, "height": 768}


@asynccontextmanager
async def chromium(profile: Path) -> AsyncIterator[BrowserContext]:
    """A browser the size of a laptop's screen, with a profile of its own."""
    executable = need_command("chromium", "chromium")
    ARTIFACTS.mkdir(exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport=LAPTOP,
        )
        try:
            yield browser
        finally:
            await browser.close()


def png_size(path: Path) -> tuple[int, int]:
    """The width and height a PNG file's header gives."""
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is no PNG"
    assert header[12:16] == b"IHDR", f"{path} starts with no PNG header chunk"
    width, height = struct.unpack(">II", header[16:24])
    return width, height
