"""Renaming JavaScript: tokens that are code, names the mission owns, every use of them."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from generation.renderings import javascript
from generation.renderings.scan import RenderingFailed, SourceFile
from tests.support.tools import need_command


def renamable(**files: str) -> set[str]:
    found = javascript.scan(
        [
            SourceFile(f"{name.replace('_', '.')}.js", textwrap.dedent(text), True, True)
            for name, text in files.items()
        ]
    )
    return set(found.renamable)


def rewritten(source: str, **renames: str) -> str:
    return javascript.rewrite("code.js", textwrap.dedent(source), renames)


def test_template_literal_expressions_are_renamed_and_their_text_is_not() -> None:
    source = """
        const price = 3;
        const label = (quantity) => `price ${price * quantity} for ${`${quantity} x`} {price}`;
    """
    renamed = rewritten(source, price="cost", quantity="count")
    assert "const cost = 3;" in renamed
    assert "(count) => `price ${cost * count} for ${`${count} x`} {price}`" in renamed


def test_object_shorthand_renames_the_property_and_the_variable_together() -> None:
    source = """
        function summary(lines) {
          const subtotal = lines.reduce((sum, line) => sum + line.priceCents, 0);
          return { subtotal, total: subtotal + 1 };
        }
        module.exports = { summary };
    """
    test = """
        const { summary } = require('./cart');
        test('totals', () => {
          const result = summary([{ priceCents: 2 }]);
          expect(result.subtotal).toBe(2);
          expect(result).toEqual({ subtotal: 2, total: 3 });
        });
    """
    found = renamable(cart=source, cart_test=test)
    assert {"summary", "lines", "subtotal", "total", "line", "priceCents", "result"} <= found
    assert {"reduce", "test", "expect", "toBe", "toEqual", "module", "exports"}.isdisjoint(found)
    assert "return { gross, total: gross + 1 };" in rewritten(source, subtotal="gross")
    assert "expect(result.gross).toBe(2);" in rewritten(test, subtotal="gross")
    assert "toEqual({ gross: 2, total: 3 })" in rewritten(test, subtotal="gross")


def test_regular_expressions_strings_and_comments_are_not_code() -> None:
    source = """
        // email: checked below
        const EMAIL = /^[^\\s@]+@email\\.[a-z]+$/i;
        const half = total / 2 / email;
        const message = 'email ' + "total";
    """
    renamed = rewritten(source, email="address", EMAIL="ADDRESS", total="sum")
    assert "// email: checked below" in renamed
    assert "const ADDRESS = /^[^\\s@]+@email\\.[a-z]+$/i;" in renamed
    assert "const half = sum / 2 / address;" in renamed
    assert "'email ' + \"total\"" in renamed


def test_names_bound_from_packages_and_properties_never_written_are_pinned() -> None:
    found = renamable(
        code="""
        const { sum, max: largest } = require('lodash');
        import chunk from 'lodash/chunk';
        function total(event, amounts) {
          const target = event.target;
          return sum(amounts) + largest(amounts) + chunk(amounts).length + target;
        }
        """
    )
    assert {"sum", "largest", "chunk", "target", "length"}.isdisjoint(found)
    assert {"total", "event", "amounts"} <= found


def test_names_spelled_in_strings_and_builtins_are_pinned() -> None:
    found = renamable(
        code="""
        const errors = {};
        function check(form, topic) {
          if (form.topic === 'order') errors['email'] = form.name;
          const email = form.email;
          return { errors, order: topic, email };
        }
        """
    )
    assert {"order", "email", "name"}.isdisjoint(found)
    assert "topic" not in found  # read as `form.topic`, which no code of the mission writes
    assert {"errors", "check", "form"} <= found


def test_parameters_defaults_destructuring_and_methods_are_declarations() -> None:
    found = renamable(
        code="""
        class Pager {
          links(current, total, around = 1) { return [current, total, around]; }
        }
        function filterProducts(products, { minPrice = 0, inStockOnly = false }) {
          return products.filter((product) => product.price >= minPrice || inStockOnly);
        }
        const pager = new Pager();
        const shown = filterProducts([{ price: 2 }], { minPrice: 1 }).concat(pager.links(1, 2));
        """
    )
    assert {
        "Pager", "links", "current", "total", "around", "filterProducts", "products",
        "minPrice", "inStockOnly", "product", "price", "pager", "shown",
    } <= found  # fmt: skip
    assert {"filter", "concat"}.isdisjoint(found)


def test_an_unclosed_template_cannot_be_rendered() -> None:
    with pytest.raises(RenderingFailed, match="template literal"):
        javascript.rewrite("code.js", "const a = `open ${b}", {"a": "c"})


def test_comments_change_only_in_their_code_spans() -> None:
    source = "// the `price` of a line, in cents: price times `quantity`\n/* `price` */ price;\n"
    assert rewritten(source, price="cost") == (
        "// the `cost` of a line, in cents: price times `quantity`\n/* `cost` */ cost;\n"
    )


def test_arguments_are_not_properties_the_mission_writes() -> None:
    found = renamable(
        code="""
        function total(event, amount) {
          return Math.max(event, amount, 0) + event.amount;
        }
        """
    )
    assert "amount" not in found  # `event.amount` is read, and nothing writes it
    assert {"total", "event"} <= found


RICH_PROGRAM = r"""
'use strict';
const DEFAULT_SHARE = 0.5;
class Basket {
  constructor(owner, items = []) {
    this.owner = owner;
    this.items = items;
  }
  get weight() {
    return this.items.reduce((total, item) => total + item.grams, 0);
  }
  add(...found) {
    this.items.push(...found);
    return this;
  }
  static heavier(first, second) {
    return first.weight >= second.weight ? first : second;
  }
}
function summary(baskets, { share = DEFAULT_SHARE, label = (owner) => `<${owner}>` } = {}) {
  const heaviest = baskets.reduce(Basket.heavier);
  const { owner, items: [firstItem, ...otherItems] } = heaviest;
  const pattern = /^[a-z]+\/\d$/;
  const totals = baskets.map(({ owner: who, weight }) => ({ who, weight, half: weight / 2 }));
  const matched = heaviest.items.filter((item) => pattern.test(item.code ?? '')).length;
  return `${label(owner)} ${firstItem?.grams} ${otherItems.length} ${share * 2} ${matched} ${JSON.stringify(totals)}`;
}
const apple = { grams: 150, code: 'fruit/1' };
const basketOfAda = new Basket('ada').add(apple, { grams: 50, code: 'x' });
console.log(summary([basketOfAda, new Basket('bob', [{ grams: 10 }])], { share: 0.25 }));
"""


def test_renaming_every_renamable_name_keeps_what_a_rich_program_prints() -> None:
    node = need_command("node", "nodejs")
    found = javascript.scan([SourceFile("shop.js", RICH_PROGRAM, defines=True, visible=True)])
    assert {"Basket", "summary", "heaviest", "firstItem", "otherItems", "apple"} <= set(
        found.renamable
    )
    # The program reads keys as data (`JSON.stringify`): every property name stays.
    assert {"grams", "weight", "who", "half", "owner", "items"}.isdisjoint(found.renamable)
    renames = {name: f"{name}Renamed" for name in found.renamable}
    renamed = javascript.rewrite("shop.js", RICH_PROGRAM, renames)
    assert renamed != RICH_PROGRAM
    printed = [
        subprocess.run([node, "-e", program], capture_output=True, text=True, check=True).stdout
        for program in (RICH_PROGRAM, renamed)
    ]
    assert printed[0] == printed[1]
    assert printed[0].startswith("<ada> 150 1 0.5 1 ")
