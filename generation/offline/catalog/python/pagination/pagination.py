"""Cutting a list of results into numbered pages."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Page:
    number: int
    results: list[str]
    total_pages: int
    has_previous: bool
    has_next: bool


def paginate(results: list[str], number: int, per_page: int) -> Page:
    _require_positive(number=number, per_page=per_page)
    total_pages = (len(results) + per_page - 1) // per_page
    start = (number - 1) * per_page
    return Page(
        number=number,
        results=results[start : start + per_page],
        total_pages=total_pages,
        has_previous=number > 1,
        has_next=number < total_pages,
    )


def _require_positive(**values: int) -> None:
    for name, value in values.items():
        if value < 1:
            raise ValueError(f"{name} must be 1 or more, got {value}")
