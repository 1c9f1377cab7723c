from decimal import Decimal

from cart import CartLine, cart_total


def line(product: str, unit_price: str, quantity: int) -> CartLine:
    return CartLine(product, Decimal(unit_price), quantity)


def test_a_classroom_order() -> None:
    carts = [
        [line("pencil", "0.50", 10), line("eraser", "1.20", 2)],  # 4.50 + 2.40 + shipping
        [line("notebook", "2.50", 20), line("ruler", "5.00", 1)],  # 45.00 + 5.00: free
        [],
    ]
    assert [cart_total(cart) for cart in carts] == [
        Decimal("11.80"),
        Decimal("50.00"),
        Decimal("0.00"),
    ]


def test_an_office_restock() -> None:
    carts = [
        [line("paper ream", "5.00", 10), line("stapler", "5.00", 1)],  # 45.00 + 5.00: free
        [line("pen", "1.00", 9), line("folder", "0.80", 12)],  # 9.00 + 8.64 + shipping
        [],
    ]
    assert [cart_total(cart) for cart in carts] == [
        Decimal("50.00"),
        Decimal("22.54"),
        Decimal("0.00"),
    ]


def test_single_product_orders() -> None:
    carts = [
        [line("fountain pen", "25.00", 2)],  # exactly 50.00: free shipping
        [line("ink cartridge", "1.10", 10)],  # 9.90 + shipping
        [line("sketchbook", "6.00", 3)],  # 18.00 + shipping
    ]
    assert [cart_total(cart) for cart in carts] == [
        Decimal("50.00"),
        Decimal("14.80"),
        Decimal("22.90"),
    ]
