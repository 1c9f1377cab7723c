from inventory import Allocation, Order, allocate


def test_a_morning_of_web_orders() -> None:
    stock = {"MUG-01": 5, "TEE-M": 3, "CAP-02": 10}
    orders = [
        Order("A100", {"MUG-01": 2, "TEE-M": 3}),  # takes the last T-shirts
        Order("A101", {"TEE-M": 1}),
        Order("A102", {"CAP-02": 1, "POSTER": 1}),  # never stocked
        Order("A103", {"MUG-01": 3, "CAP-02": 4}),  # exactly the mugs that are left
    ]
    assert allocate(stock, orders, reorder_level=6) == Allocation(
        shipped=["A100", "A103"],
        backordered=["A101", "A102"],
        remaining={"MUG-01": 0, "TEE-M": 0, "CAP-02": 6},
        to_reorder=["CAP-02", "MUG-01", "TEE-M"],
    )


def test_a_wholesale_order_that_cannot_be_split() -> None:
    stock = {"BOLT-8": 100, "NUT-8": 40, "WASHER": 8}
    orders = [
        Order("W1", {"BOLT-8": 60, "NUT-8": 60}),  # not enough nuts: nothing is taken
        Order("W2", {"BOLT-8": 60, "NUT-8": 38}),
        Order("W3", {"WASHER": 8, "SPRING": 1}),  # never stocked
        Order("W4", {"WASHER": 8}),  # all the washers
    ]
    assert allocate(stock, orders, reorder_level=2) == Allocation(
        shipped=["W2", "W4"],
        backordered=["W1", "W3"],
        remaining={"BOLT-8": 40, "NUT-8": 2, "WASHER": 0},
        to_reorder=["NUT-8", "WASHER"],
    )


def test_a_bookshop_preorder_day() -> None:
    stock = {"ISBN-1": 1, "ISBN-2": 4, "ISBN-3": 12}
    orders = [
        Order("P1", {"ISBN-1": 1}),  # the only copy
        Order("P2", {"ISBN-1": 1, "ISBN-3": 1}),
        Order("P3", {"ISBN-2": 4, "ISBN-3": 7}),  # exactly the copies of ISBN-2 in stock
        Order("P4", {"ISBN-4": 1}),  # never stocked
    ]
    assert allocate(stock, orders, reorder_level=5) == Allocation(
        shipped=["P1", "P3"],
        backordered=["P2", "P4"],
        remaining={"ISBN-1": 0, "ISBN-2": 0, "ISBN-3": 5},
        to_reorder=["ISBN-1", "ISBN-2", "ISBN-3"],
    )
