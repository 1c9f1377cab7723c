from datetime import date

from bookings import unavailable_periods


def test_a_season_of_bookings_given_out_of_order() -> None:
    bookings = [
        (date(2025, 8, 20), date(2025, 8, 24)),
        (date(2025, 8, 1), date(2025, 8, 3)),
        (date(2025, 8, 4), date(2025, 8, 6)),  # starts the night after the last one ends
        (date(2025, 8, 22), date(2025, 8, 23)),  # inside the stay before it
        (date(2025, 8, 8), date(2025, 8, 9)),  # one free night (the 7th) before it
    ]
    assert unavailable_periods(bookings) == [
        (date(2025, 8, 1), date(2025, 8, 6)),
        (date(2025, 8, 8), date(2025, 8, 9)),
        (date(2025, 8, 20), date(2025, 8, 24)),
    ]


def test_a_single_booking_and_none() -> None:
    only = [(date(2026, 1, 10), date(2026, 1, 12))]
    assert unavailable_periods(only) == only
    assert unavailable_periods([]) == []
