const { cartSummary } = require('./cart');

test('a coupon that brings the total under free shipping', () => {
  const lines = [{ priceCents: 2750, quantity: 2 }];
  expect(cartSummary(lines, { percent: 20, minimumCents: 3000 })).toEqual({
    subtotal: 5500,
    discount: 1100,
    shipping: 490,
    total: 4890,
  });
});

test('a coupon whose minimum is not reached, and an empty cart', () => {
  expect(cartSummary([{ priceCents: 999, quantity: 3 }], { percent: 10, minimumCents: 5000 })).toEqual({
    subtotal: 2997,
    discount: 0,
    shipping: 490,
    total: 3487,
  });
  expect(cartSummary([], null)).toEqual({ subtotal: 0, discount: 0, shipping: 0, total: 0 });
});
