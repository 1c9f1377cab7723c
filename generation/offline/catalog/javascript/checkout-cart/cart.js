'use strict';

// Amounts are in cents, so no rounding error creeps into a total.
const FREE_SHIPPING_CENTS = 5000;
const SHIPPING_CENTS = 490;

function cartSummary(lines, coupon) {
  let subtotal = 0;
  for (const line of lines) {
    subtotal += line.priceCents * line.quantity;
  }
  let discount = 0;
  if (coupon && subtotal >= coupon.minimumCents) {
    discount = Math.round((subtotal * coupon.percent) / 100);
  }
  const afterDiscount = subtotal - discount;
  const free = afterDiscount >= FREE_SHIPPING_CENTS || lines.length === 0;
  const shipping = free ? 0 : SHIPPING_CENTS;
  return { subtotal, discount, shipping, total: afterDiscount + shipping };
}

module.exports = { cartSummary };
