"""One small correct mission per language, with a planted bug that breaks every test, a change
that breaks none, and a test with a wrong expectation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    language: str
    gold: dict[str, str]
    tests: dict[str, str]
    sabotaged: dict[str, str]  # breaks every test
    harmless: dict[str, str]  # the same behaviour written differently: breaks none
    wrong_tests: dict[str, str]  # the tests with one expectation wrong
    test_ids: list[str]
    first_failure: str  # the message of the sabotaged run's first test
    wrong_test_refusal: str  # why a gold run against the wrong tests is refused


_PRICING = (
    "def discounted(price, percent):\n"
    "    if not 0 <= percent <= 100:\n"
    "        raise ValueError('percent must be between 0 and 100')\n"
    "    return round(price * (100 - percent) / 100, 2)\n"
)
_TEST_PRICING = (
    "import pytest\n"
    "from pricing import discounted\n\n"
    "def test_ten_percent():\n"
    "    assert discounted(50, 10) == 45\n\n"
    "def test_three_quarters():\n"
    "    assert discounted(80, 75) == 20\n\n"
    "def test_rounds_to_cents():\n"
    "    assert discounted(9.99, 33) == 6.69\n"
)
PYTHON = Sample(
    language="python",
    gold={"pricing.py": _PRICING},
    tests={"test_pricing.py": _TEST_PRICING},
    # Adds the discount instead of taking it off.
    sabotaged={"pricing.py": _PRICING.replace("100 - percent", "100 + percent")},
    harmless={
        "pricing.py": _PRICING.replace(
            "round(price * (100 - percent) / 100, 2)", "round(price - price * percent / 100, 2)"
        )
    },
    wrong_tests={"test_pricing.py": _TEST_PRICING.replace("== 20", "== 21")},
    test_ids=[
        "test_pricing.py::test_ten_percent",
        "test_pricing.py::test_three_quarters",
        "test_pricing.py::test_rounds_to_cents",
    ],
    first_failure="assert 55.0 == 45 + where 55.0 = discounted(50, 10)",
    wrong_test_refusal="gold failed 1 of 3 tests: test_pricing.py::test_three_quarters "
    "(assert 20.0 == 21 + where 20.0 = discounted(80, 75))",
)

_CART = (
    "function total(items) {\n"
    "  return items.reduce((sum, item) => sum + item.price * item.quantity, 0);\n"
    "}\n"
    "module.exports = { total };\n"
)
_TEST_CART = (
    "const { total } = require('./cart');\n\n"
    "describe('total', () => {\n"
    "  test('multiplies price by quantity', () => {\n"
    "    expect(total([{ price: 2, quantity: 3 }])).toBe(6);\n"
    "  });\n"
    "  test('adds every line', () => {\n"
    "    expect(total([{ price: 2, quantity: 2 }, { price: 5, quantity: 1 }])).toBe(9);\n"
    "  });\n"
    "});\n"
)
JAVASCRIPT = Sample(
    language="javascript",
    gold={"cart.js": _CART},
    tests={"cart.test.js": _TEST_CART},
    sabotaged={
        "cart.js": _CART.replace("item.price * item.quantity", "item.price + item.quantity")
    },
    harmless={"cart.js": _CART.replace("item.price * item.quantity", "item.quantity * item.price")},
    wrong_tests={"cart.test.js": _TEST_CART.replace("toBe(9)", "toBe(10)")},
    test_ids=[
        "cart.test.js > total > multiplies price by quantity",
        "cart.test.js > total > adds every line",
    ],
    first_failure="Error: expect(received).toBe(expected) // Object.is equality "
    "Expected: 6 Received: 5",
    wrong_test_refusal="gold failed 1 of 2 tests: cart.test.js > total > adds every line "
    "(Error: expect(received).toBe(expected) // Object.is equality Expected: 10 Received: 9)",
)

_SCHEMA = (
    "CREATE TABLE orders (id int PRIMARY KEY, customer text NOT NULL, amount numeric NOT NULL);\n"
    "INSERT INTO orders VALUES (1, 'ada', 10), (2, 'ada', 15), (3, 'bob', 7);\n"
)
_FUNCTIONS = (
    "CREATE FUNCTION customer_total(who text) RETURNS numeric LANGUAGE sql STABLE AS $$\n"
    "  SELECT coalesce(sum(amount), 0) FROM orders WHERE customer = who\n"
    "$$;\n"
)
_TEST_TOTALS = (
    "CREATE FUNCTION test_sums_one_customer() RETURNS SETOF TEXT LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  RETURN NEXT is(customer_total('ada'), 25::numeric, 'ada spent 25');\n"
    "  RETURN NEXT is(customer_total('bob'), 7::numeric, 'bob spent 7');\n"
    "END $$;\n"
    "CREATE FUNCTION test_unknown_customer_spent_nothing() RETURNS SETOF TEXT\n"
    "LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  RETURN NEXT is(customer_total('eve'), 0::numeric, 'eve spent nothing');\n"
    "END $$;\n"
)
SQL = Sample(
    language="sql",
    gold={"01_schema.sql": _SCHEMA, "02_functions.sql": _FUNCTIONS},
    tests={"test_totals.sql": _TEST_TOTALS},
    # Counts orders instead of summing them, and forgets the empty case.
    sabotaged={
        "01_schema.sql": _SCHEMA,
        "02_functions.sql": _FUNCTIONS.replace("coalesce(sum(amount), 0)", "nullif(count(*), 0)"),
    },
    harmless={
        "01_schema.sql": _SCHEMA,
        "02_functions.sql": _FUNCTIONS.replace("sum(amount), 0)", "sum(amount), 0.0)"),
    },
    wrong_tests={"test_totals.sql": _TEST_TOTALS.replace("7::numeric", "8::numeric")},
    test_ids=["public.test_sums_one_customer", "public.test_unknown_customer_spent_nothing"],
    first_failure="not ok 1 - ada spent 25; have: 2; want: 25; "
    "not ok 2 - bob spent 7; have: 1; want: 7",
    wrong_test_refusal="gold failed 1 of 2 tests: public.test_sums_one_customer "
    "(not ok 2 - bob spent 7; have: 7; want: 8)",
)

SAMPLES = [PYTHON, JAVASCRIPT, SQL]
