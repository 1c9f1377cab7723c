"""Turning a cottage's bookings into the periods its calendar shows as unavailable."""

from datetime import date, timedelta

Stay = tuple[date, date]  # first night, last night (both included)

ONE_NIGHT = timedelta(days=1)


def unavailable_periods(bookings: list[Stay]) -> list[Stay]:
    """Merge bookings that overlap or follow each other without a free night in between."""
    periods: list[Stay] = []
    for first, last in sorted(bookings):
        # Back to back counts as one period: nobody can book a zero-night gap.
        if periods and first <= periods[-1][1] + ONE_NIGHT:
            periods[-1] = (periods[-1][0], max(last, periods[-1][1]))
        else:
            periods.append((first, last))
    return periods
