const { cartSummary } = require('./cart');

const line = (priceCents, quantity) => ({ priceCents, quantity });

test('a weekend order with a coupon at its minimum', () => {
  const coupon = { percent: 10, minimumCents: 3000 };
  expect([
    cartSummary([line(1500, 2)], coupon),
    cartSummary([line(1000, 3), line(1000, 2)], null),
    cartSummary([], coupon),
  ]).toEqual([
    { subtotal: 3000, discount: 300, shipping: 490, total: 3190 },
    { subtotal: 5000, discount: 0, shipping: 0, total: 5000 },
    { subtotal: 0, discount: 0, shipping: 0, total: 0 },
  ]);
});

test('gift orders just under and over the free shipping line', () => {
  const coupon = { percent: 20, minimumCents: 2500 };
  expect([
    cartSummary([line(1250, 2)], coupon),
    cartSummary([line(1999, 1), line(3001, 1)], null),
    cartSummary([], null),
  ]).toEqual([
    { subtotal: 2500, discount: 500, shipping: 490, total: 2490 },
    { subtotal: 5000, discount: 0, shipping: 0, total: 5000 },
    { subtotal: 0, discount: 0, shipping: 0, total: 0 },
  ]);
});

test('a discount that lands exactly on free shipping', () => {
  const coupon = { percent: 20, minimumCents: 6250 };
  expect([
    cartSummary([line(3125, 2)], coupon),
    cartSummary([line(1200, 1)], null),
    cartSummary([], coupon),
  ]).toEqual([
    { subtotal: 6250, discount: 1250, shipping: 0, total: 5000 },
    { subtotal: 1200, discount: 0, shipping: 490, total: 1690 },
    { subtotal: 0, discount: 0, shipping: 0, total: 0 },
  ]);
});
