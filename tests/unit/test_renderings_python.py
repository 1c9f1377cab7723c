"""Renaming Python: what may be renamed, and renaming that follows every use and only those."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from generation.renderings import python
from generation.renderings.scan import RenderingFailed, SourceFile


def renamable(**files: str) -> set[str]:
    found = python.scan(
        [
            SourceFile(f"{name}.py", textwrap.dedent(text), defines=True, visible=True)
            for name, text in files.items()
        ]
    )
    return set(found.renamable)


def rewritten(source: str, **renames: str) -> str:
    return python.rewrite("code.py", textwrap.dedent(source), renames)


def run(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "code.py", "exec"), namespace)
    return namespace


def test_f_string_expressions_are_renamed_and_their_text_is_not() -> None:
    source = """
        total = 12.5
        width = 8
        line = f"total {total:>{width}} and {total!r}, width {width}"
    """
    renamed = rewritten(source, total="amount", width="span")
    assert 'f"total {amount:>{span}} and {amount!r}, width {span}"' in renamed
    assert run(renamed)["line"] == run(textwrap.dedent(source))["line"]


def test_keyword_arguments_follow_the_parameters_of_the_missions_own_callables() -> None:
    source = """
        from dataclasses import dataclass

        @dataclass(frozen=True)
        class Page:
            number: int
            has_next: bool

        def paginate(number: int, per_page: int = 10) -> Page:
            return Page(number=number, has_next=number < per_page)

        first = paginate(number=1, per_page=2)
    """
    assert {"Page", "number", "has_next", "paginate", "per_page", "first"} <= renamable(code=source)
    renamed = rewritten(source, number="index", has_next="more", per_page="size")
    assert "Page(index=index, more=index < size)" in renamed
    assert "paginate(index=1, size=2)" in renamed
    assert "@dataclass(frozen=True)" in renamed  # an external callable's keyword stays
    assert run(renamed)["first"].more is True


def test_keywords_of_external_callables_and_of_kwargs_pin_the_name() -> None:
    found = renamable(
        code="""
        def rank(scores, key):
            ordered = sorted(scores, key=lambda entry: entry[1])
            return ordered[key]

        def require(**values):
            return [name for name in values]

        def check(number, per_page):
            return require(number=number, per_page=per_page)
        """
    )
    assert "key" not in found  # `sorted(key=...)` is not the mission's `key`
    assert {"number", "per_page"}.isdisjoint(found)  # they become the keys of `values`
    assert {"rank", "scores", "ordered", "entry", "require", "values", "check"} <= found


def test_attributes_are_renamed_where_the_mission_defines_them_and_kept_elsewhere() -> None:
    source = """
        from collections import OrderedDict

        class Cache:
            def __init__(self, capacity):
                self.capacity = capacity
                self.entries = OrderedDict()

            def put(self, key, value):
                self.entries[key] = value
                self.entries.move_to_end(key)
                if len(self.entries) > self.capacity:
                    self.entries.popitem(last=False)

            def get(self, key):
                return self.entries.get(key)

        cache = Cache(capacity=1)
        cache.put("a", 1)
        cache.put("b", 2)
        kept = list(cache.entries)
    """
    found = renamable(lru=source)
    assert {"Cache", "capacity", "entries", "put", "cache", "kept"} <= found
    assert "get" not in found  # also `dict.get`: the renaming could not tell them apart
    assert {"move_to_end", "popitem", "last"}.isdisjoint(found)
    renamed = rewritten(source, capacity="size", entries="records", put="store")
    assert "self.size = size" in renamed
    assert "self.records.move_to_end(key)" in renamed
    assert "cache.store(" in renamed
    assert run(renamed)["kept"] == ["b"]


def test_a_name_read_as_an_attribute_of_something_else_is_pinned() -> None:
    found = renamable(
        code="""
        import datetime

        def total(stamp: datetime.datetime, day: int) -> int:
            return stamp.day + day
        """
    )
    assert "day" not in found  # `stamp.day` belongs to datetime
    assert {"total", "stamp"} <= found


def test_imports_between_the_missions_modules_are_renamed_and_module_names_kept() -> None:
    found = renamable(
        cart="def cart_total(lines):\n    return sum(lines)\n",
        test_cart=(
            "import cart\nfrom cart import cart_total as total\n\n"
            "def test_totals():\n    for cart_lines in ([1], [2]):\n"
            "        assert cart.cart_total(cart_lines) == total(cart_lines)\n"
        ),
    )
    assert {"cart_total", "lines", "total", "cart_lines"} <= found
    assert {"cart", "test_totals"}.isdisjoint(found)
    test = python.rewrite(
        "test_cart.py",
        "import cart\nfrom cart import cart_total as total\n"
        "assert cart.cart_total([1]) == total([1])\n",
        {"cart_total": "basket_sum", "total": "overall"},
    )
    assert test == (
        "import cart\nfrom cart import basket_sum as overall\n"
        "assert cart.basket_sum([1]) == overall([1])\n"
    )


def test_names_the_standard_library_or_builtins_give_are_kept() -> None:
    found = renamable(
        code="""
        from decimal import Decimal
        from datetime import date as day

        def price(amount):
            value = Decimal(amount)
            return max(value, Decimal(0)), day.today()
        """
    )
    assert {"Decimal", "max", "date"}.isdisjoint(found)
    assert {"price", "amount", "value", "day"} <= found


def test_shadowing_and_reuse_of_a_name_in_several_scopes_stay_consistent() -> None:
    source = """
        def total(values):
            return sum(values)

        def report(values):
            total_ = total(values)
            def inner():
                nonlocal total_
                total_ += 1
                return total_
            return inner()

        def again(total):
            return total * 2

        result = (report([1, 2]), again(3))
    """
    renamed = rewritten(source, total="overall", values="amounts", total_="running")
    assert "def again(overall):\n    return overall * 2" in renamed
    assert "nonlocal running" in renamed
    assert run(renamed)["result"] == run(textwrap.dedent(source))["result"] == (4, 6)


def test_strings_never_change_and_prose_changes_only_in_its_code_spans() -> None:
    source = '''
        def price(item):
            """The price of `item`, from its price field: `item.price`."""
            # item price: what the `item` costs
            return getattr(item, "price") + len("item price")
    '''
    assert "price" not in renamable(code=source)  # `getattr(item, "price")`
    renamed = rewritten(source, item="article")
    assert '"""The price of `article`, from its price field: `article.price`."""' in renamed
    assert "# item price: what the `article` costs" in renamed
    assert 'getattr(article, "price") + len("item price")' in renamed


def test_what_pytest_finds_by_name_is_pinned() -> None:
    found = renamable(
        conftest="import pytest\n\n@pytest.fixture\ndef basket():\n    return []\n",
        test_shop="""
        import pytest

        @pytest.mark.parametrize("quantity, expected", [(1, 2)])
        def test_doubling(basket, quantity, expected):
            doubled = quantity * 2
            assert doubled == expected
        """,
    )
    assert {"basket", "quantity", "expected", "test_doubling"}.isdisjoint(found)
    assert "doubled" in found


def test_names_in_match_patterns_and_dunder_names_are_pinned() -> None:
    found = renamable(
        code="""
        class Point:
            __slots__ = ("x", "y")
            def __init__(self, x, y):
                self.x, self.y = x, y

        def describe(shape):
            match shape:
                case Point(x=across, y=0):
                    return across
                case [first, *rest]:
                    return first
            return None
        """
    )
    assert {"across", "first", "rest", "x", "y", "__init__", "__slots__"}.isdisjoint(found)
    assert {"Point", "describe", "shape"} <= found


def test_code_that_does_not_parse_cannot_be_rendered() -> None:
    with pytest.raises(RenderingFailed, match="does not parse"):
        python.rewrite("code.py", "def broken(:\n", {"broken": "whole"})


def test_non_ascii_text_before_a_name_keeps_the_columns_right() -> None:
    renamed = rewritten('label = "prix en €"; price = 3; both = (label, price)\n', price="cost")
    assert renamed == 'label = "prix en €"; cost = 3; both = (label, cost)\n'


def test_attributes_of_the_standard_librarys_classes_are_pinned() -> None:
    found = renamable(
        code="""
        from dataclasses import dataclass
        from datetime import date

        @dataclass
        class Booking:
            day: int
            nights: int

        def same_day(booking: Booking, when: date) -> bool:
            return booking.day == when.day
        """
    )
    assert "day" not in found  # the mission's field, but also `date.day`
    assert {"Booking", "nights", "same_day", "booking", "when"} <= found


def test_renaming_every_renamable_name_keeps_what_a_rich_program_computes() -> None:
    source = textwrap.dedent(
        """
        from __future__ import annotations

        import functools
        from dataclasses import dataclass, field

        LIMIT = 3
        counter = 0


        def bump() -> int:
            global counter
            counter += 1
            return counter


        def logged(function):
            @functools.wraps(function)
            def wrapper(*arguments, **options):
                bump()
                return function(*arguments, **options)

            return wrapper


        @dataclass
        class Basket:
            owner: str
            items: list[int] = field(default_factory=list)

            def __post_init__(self) -> None:
                self.opened = bump()

            @property
            def weight(self) -> int:
                return sum(self.items)

            @classmethod
            def empty(cls, owner: str) -> Basket:
                return cls(owner=owner)

            @staticmethod
            def heavier(first: Basket, second: Basket) -> Basket:
                return first if first.weight >= second.weight else second


        class Cart(Basket):
            def add(self, *amounts: int, repeat: int = 1) -> Cart:
                self.items.extend(amount for amount in amounts for _ in range(repeat))
                return self


        @logged
        def summary(baskets: list[Basket], *, limit: int = LIMIT) -> str:
            heaviest = functools.reduce(Basket.heavier, baskets)
            try:
                share = heaviest.weight / sum(basket.weight for basket in baskets)
            except ZeroDivisionError as problem:
                share = str(problem)
            if (count := len(baskets)) > limit:
                count = limit
            squares = {basket.owner: basket.weight**2 for basket in baskets}
            picked = sorted(squares, key=lambda owner, scale=2: squares[owner] * scale)
            return f"{heaviest.owner}:{share!r}:{count}:{picked}:{counter}:{heaviest.opened}"


        result = summary(
            [Cart.empty("ada").add(2, 3), Cart("bob").add(5, repeat=2), Basket("cy", [1])],
            limit=2,
        )
        """
    )
    found = python.scan([SourceFile("shop.py", source, defines=True, visible=True)])
    assert {"Basket", "Cart", "weight", "heavier", "summary", "picked", "problem"} <= set(
        found.renamable
    )
    renames = {name: f"{name}_renamed" for name in found.renamable}
    renamed = python.rewrite("shop.py", source, renames)
    assert renamed != source
    computed = run(renamed)[renames.get("result", "result")]
    assert computed == run(source)["result"] == "bob:0.625:2:['cy', 'ada', 'bob']:4:2"


def test_attribute_names_read_as_data_are_pinned() -> None:
    source = """
        import json
        from dataclasses import asdict, dataclass

        @dataclass
        class Page:
            number: int

        def export(page: Page) -> str:
            return json.dumps(asdict(page))

        assert export(Page(1)) == '{"number": 1}'
    """
    found = renamable(code=source)
    assert "number" not in found  # `asdict` makes it a key of the JSON
    assert {"Page", "export", "page"} <= found
