from inventory import Order, allocate


def test_an_order_that_cannot_ship_takes_nothing() -> None:
    stock = {"BOLT": 100, "NUT": 40, "WASHER": 5}
    orders = [
        Order("A-1", {"BOLT": 60, "NUT": 30}),
        Order("A-2", {"BOLT": 50, "WASHER": 1}),  # only 40 bolts left: backordered whole
        Order("A-3", {"WASHER": 5}),
    ]
    allocation = allocate(stock, orders, reorder_level=10)
    assert allocation.shipped == ["A-1", "A-3"]
    assert allocation.backordered == ["A-2"]
    assert allocation.remaining == {"BOLT": 40, "NUT": 10, "WASHER": 0}
    assert allocation.to_reorder == ["NUT", "WASHER"]


def test_an_unknown_product_is_backordered() -> None:
    allocation = allocate({"GEAR": 3}, [Order("B-1", {"SPRING": 1})], reorder_level=0)
    assert (allocation.shipped, allocation.backordered) == ([], ["B-1"])
    assert allocation.remaining == {"GEAR": 3}
    assert allocation.to_reorder == []
