"""Small bar charts, measured here and drawn by the templates as inline SVG: no script and no
resource from elsewhere, which the pages' content security policy would refuse anyway."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from pool.stats import HourOfServes

BAR_WIDTH = 6
BAR_GAP = 1
CHART_HEIGHT = 32


class Bar(NamedTuple):
    hour: datetime
    serves: int
    x: int
    y: float
    height: float


class BarChart(NamedTuple):
    width: int
    height: int
    bar_width: int
    bars: list[Bar]
    total: int
    peak: int


def hourly_serves(hours: list[HourOfServes]) -> BarChart:
    """One bar per hour, the oldest on the left; the busiest hour fills the height."""
    peak = max((hour.serves for hour in hours), default=0)
    bars = []
    for index, hour in enumerate(hours):
        height = round(hour.serves / peak * CHART_HEIGHT, 2) if peak else 0.0
        bars.append(
            Bar(
                hour=hour.hour,
                serves=hour.serves,
                x=index * (BAR_WIDTH + BAR_GAP),
                y=round(CHART_HEIGHT - height, 2),
                height=height,
            )
        )
    return BarChart(
        width=max(0, len(hours) * (BAR_WIDTH + BAR_GAP) - BAR_GAP),
        height=CHART_HEIGHT,
        bar_width=BAR_WIDTH,
        bars=bars,
        total=sum(hour.serves for hour in hours),
        peak=peak,
    )
