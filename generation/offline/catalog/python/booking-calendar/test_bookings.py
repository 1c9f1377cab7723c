from datetime import date

from bookings import unavailable_periods


def d(month: int, day: int) -> date:
    return date(2024, month, day)


def test_a_summer_of_family_bookings() -> None:
    bookings = [
        (d(7, 20), d(7, 27)),
        (d(7, 1), d(7, 7)),
        (d(7, 8), d(7, 14)),  # arrives the morning after the previous guests leave
        (d(7, 2), d(7, 4)),  # inside the first week
        (d(7, 25), d(8, 2)),  # overlaps the stay before it
        (d(8, 4), d(8, 6)),  # one free night before it
    ]
    assert unavailable_periods(bookings) == [
        (d(7, 1), d(7, 14)),
        (d(7, 20), d(8, 2)),
        (d(8, 4), d(8, 6)),
    ]


def test_weekend_breaks_and_a_long_let() -> None:
    bookings = [
        (d(10, 4), d(10, 5)),
        (d(10, 6), d(10, 6)),  # back to back with the weekend
        (d(10, 1), d(10, 31)),  # the long let covers everything in October
        (d(11, 8), d(11, 9)),
        (d(11, 2), d(11, 3)),  # the night after the long let ends
        (d(11, 1), d(11, 1)),
    ]
    assert unavailable_periods(bookings) == [
        (d(10, 1), d(11, 3)),
        (d(11, 8), d(11, 9)),
    ]


def test_owner_blocks_around_new_year() -> None:
    bookings = [
        (date(2025, 1, 2), date(2025, 1, 5)),
        (date(2024, 12, 27), date(2025, 1, 1)),  # back to back across the year end
        (date(2024, 12, 28), date(2024, 12, 30)),  # inside the stay before it
        (date(2025, 1, 4), date(2025, 1, 10)),  # overlaps
        (date(2025, 1, 12), date(2025, 1, 14)),  # one free night on the 11th
    ]
    assert unavailable_periods(bookings) == [
        (date(2024, 12, 27), date(2025, 1, 10)),
        (date(2025, 1, 12), date(2025, 1, 14)),
    ]
