"""The serves chart's geometry: one bar per hour, the busiest hour at full height."""

from datetime import UTC, datetime, timedelta

from pool.stats import HourOfServes
from server.ui.charts import BAR_GAP, BAR_WIDTH, CHART_HEIGHT, hourly_serves

START = datetime(2025, 3, 1, tzinfo=UTC)


def hours(*serves: int) -> list[HourOfServes]:
    return [
        HourOfServes(START + timedelta(hours=index), count) for index, count in enumerate(serves)
    ]


def test_bars_scale_to_the_busiest_hour_and_stand_on_the_baseline() -> None:
    chart = hourly_serves(hours(0, 4, 1, 2))
    assert [bar.height for bar in chart.bars] == [
        0.0,
        CHART_HEIGHT,
        CHART_HEIGHT / 4,
        CHART_HEIGHT / 2,
    ]
    assert all(bar.y + bar.height == CHART_HEIGHT for bar in chart.bars)
    assert [bar.x for bar in chart.bars] == [index * (BAR_WIDTH + BAR_GAP) for index in range(4)]
    assert chart.width == 4 * BAR_WIDTH + 3 * BAR_GAP
    assert (chart.total, chart.peak) == (7, 4)
    assert chart.bars[1].hour == START + timedelta(hours=1)


def test_no_serves_draws_flat_bars() -> None:
    chart = hourly_serves(hours(0, 0, 0))
    assert {bar.height for bar in chart.bars} == {0.0}
    assert (chart.total, chart.peak) == (0, 0)
