from decimal import Decimal

from cart import CartLine, cart_total


def test_a_bulk_line_beside_a_small_one_under_free_shipping() -> None:
    lines = [
        CartLine("pencil", Decimal("0.80"), 12),  # 9.60, bulk: 8.64
        CartLine("notebook", Decimal("3.25"), 2),  # 6.50
    ]
    assert cart_total(lines) == Decimal("20.04")  # 15.14 + 4.90 shipping


def test_exactly_the_free_shipping_threshold_and_an_empty_cart() -> None:
    assert cart_total([CartLine("fountain pen", Decimal("25.00"), 2)]) == Decimal("50.00")
    assert cart_total([]) == Decimal("0.00")
