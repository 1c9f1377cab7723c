"""Cart totals for the stationery shop: bulk discounts per line, then shipping."""

from dataclasses import dataclass
from decimal import Decimal

BULK_QUANTITY = 10
BULK_DISCOUNT = Decimal("0.10")
FREE_SHIPPING_FROM = Decimal("50.00")
SHIPPING = Decimal("4.90")
CENT = Decimal("0.01")


@dataclass(frozen=True)
class CartLine:
    product: str
    unit_price: Decimal
    quantity: int


def cart_total(lines: list[CartLine]) -> Decimal:
    subtotal = Decimal(0)
    for line in lines:
        amount = line.unit_price * line.quantity
        if line.quantity >= BULK_QUANTITY:
            amount -= amount * BULK_DISCOUNT
        subtotal += amount
    free = subtotal >= FREE_SHIPPING_FROM or not lines
    shipping = Decimal(0) if free else SHIPPING
    return (subtotal + shipping).quantize(CENT)
