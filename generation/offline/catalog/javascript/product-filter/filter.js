'use strict';

function filterProducts(products, { minPrice = 0, maxPrice = Infinity, inStockOnly = false, query = '' }) {
  const words = query.toLowerCase().split(/\s+/).filter(Boolean);
  return products
    .filter((product) => product.price >= minPrice && product.price <= maxPrice)
    .filter((product) => !inStockOnly || product.stock > 0)
    .filter((product) => words.every((word) => product.name.toLowerCase().includes(word)))
    .sort((a, b) => a.price - b.price || a.name.localeCompare(b.name));
}

module.exports = { filterProducts };
