"""What route handlers are given: the pool, the key store, the domain map, the queue limits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import asyncpg
from litestar import Request

from core.domains import DomainMap
from generation.queue import Limits
from server.auth import KeyStore
from server.settings import Settings


@dataclass
class Services:
    settings: Settings
    domain_map: DomainMap
    limits: Limits
    pool: asyncpg.Pool
    keys: KeyStore


def provide_services(request: Request[Any, Any, Any]) -> Services:
    services: Services = request.app.state.services
    return services
