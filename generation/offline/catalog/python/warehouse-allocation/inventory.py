"""Allocating a warehouse's stock to orders, all or nothing per order."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Order:
    id: str
    lines: dict[str, int]  # product code -> quantity


@dataclass(frozen=True)
class Allocation:
    shipped: list[str]
    backordered: list[str]
    remaining: dict[str, int]
    to_reorder: list[str]


def allocate(stock: dict[str, int], orders: list[Order], reorder_level: int) -> Allocation:
    remaining = dict(stock)
    shipped, backordered = [], []
    for order in orders:
        if all(remaining.get(product, 0) >= quantity for product, quantity in order.lines.items()):
            for product, quantity in order.lines.items():
                remaining[product] -= quantity
            shipped.append(order.id)
        else:
            backordered.append(order.id)
    to_reorder = sorted(product for product, left in remaining.items() if left <= reorder_level)
    return Allocation(shipped, backordered, remaining, to_reorder)
