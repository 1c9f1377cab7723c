"""HTTP load from wrk (Debian's `wrk` package): a load generator in C that costs the 2 cores
little, on keep-alive connections, so the figures are the server's and not the client's."""

from __future__ import annotations

import asyncio
import re
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Figures:
    rate: float
    p50_ms: float
    p99_ms: float

    def line(self, name: str) -> str:
        return f"{name:<34} {self.rate:>9.0f}/s  p50 {self.p50_ms:>6.1f} ms  p99 {self.p99_ms:>6.1f} ms"


def figures(latencies: list[float], seconds: float) -> Figures:
    latencies.sort()
    return Figures(
        rate=len(latencies) / seconds,
        p50_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
    )


UNIT_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
# Every request names a user of its own (and, for idempotent routes, a key of its own).
SCRIPT = """
local thread_id = 0
local threads = {}
setup = function(thread)
    thread:set("id", thread_id)
    thread_id = thread_id + 1
    table.insert(threads, thread)
end
-- An answer that is not a 2xx: its status and body, the first of each thread, said at the end.
failed = nil
response = function(status, headers, body)
    if status >= 300 and failed == nil then failed = status .. " " .. body end
end
done = function(summary, latency, requests)
    for _, thread in ipairs(threads) do
        local answer = thread:get("failed")
        if answer then print("first failure: " .. answer) end
    end
end
local sent = 0
request = function()
    sent = sent + 1
    local unique = string.format("%s-%d-%d", run, id, sent)
    if idempotent then headers["Idempotency-Key"] = "k-" .. unique end
    local body = string.format('{"user_id": "wrk-%s", "track": "%s"}', unique, track)
    return wrk.format("POST", path, headers, body)
end
"""


async def wrk(
    url: str,
    key: str,
    *,
    path: str,
    track: str,
    clients: int,
    seconds: float,
    rate: float | None = None,
    idempotent: bool = False,
) -> Figures:
    """POST {"user_id", "track"} to `path` for `seconds`; every answer must be a 2xx. With
    `rate`, each connection waits between its requests so that all together send about `rate`
    a second."""
    # Random pauses (mean clients / rate) keep the connections from sending in lockstep bursts.
    mean_ms = 1000 * clients / rate if rate else 0
    pause = f"delay = function() return math.random() * {2 * mean_ms:.1f} end\n" if rate else ""
    script = Path(tempfile.mkdtemp()) / "load.lua"
    script.write_text(
        f'run = "{time.time_ns()}"\npath = "{path}"\ntrack = "{track}"\n'
        f"idempotent = {'true' if idempotent else 'false'}\n"
        f'headers = {{["Content-Type"] = "application/json", ["Authorization"] = "Bearer {key}"}}\n'
        + pause
        + SCRIPT
    )
    return await _run(["-s", str(script), url], clients=clients, seconds=seconds)


async def wrk_get(url: str, *, path: str, clients: int, seconds: float) -> Figures:
    """GET `path`, without a key, on `clients` connections that each send their next request as
    soon as the previous one is answered, for `seconds`; every answer must be a 2xx, however
    long it takes (wrk's own limit is 2 s)."""
    return await _run(["--timeout", "60s", f"{url}{path}"], clients=clients, seconds=seconds)


async def _run(arguments: list[str], *, clients: int, seconds: float) -> Figures:
    if shutil.which("wrk") is None:
        raise SystemExit("the HTTP load needs wrk: apt-get install -y wrk")
    process = await asyncio.create_subprocess_exec(
        "wrk",
        f"-t{min(clients, 2)}",
        f"-c{clients}",
        f"-d{max(1, round(seconds))}s",  # wrk counts whole seconds
        "--latency",
        *arguments,
        stdout=asyncio.subprocess.PIPE,
    )
    output = (await process.communicate())[0].decode()
    assert "Non-2xx" not in output, output
    assert "Socket errors" not in output, output
    assert "99%" in output, output
    latency = {
        percent: float(value) * UNIT_MS[unit]
        for percent, value, unit in re.findall(
            r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", output, re.M
        )
    }
    assert set(latency) == {"50", "99"}, output
    found = re.search(r"Requests/sec:\s+([\d.]+)", output)
    assert found is not None, output
    return Figures(rate=float(found.group(1)), p50_ms=latency["50"], p99_ms=latency["99"])
