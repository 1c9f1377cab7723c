const { filterProducts } = require('./filter');

const products = [
  { name: 'Oak desk lamp', price: 49, stock: 3 },
  { name: 'Brass desk lamp', price: 49, stock: 0 },
  { name: 'Floor lamp', price: 89, stock: 5 },
  { name: 'Oak shelf', price: 120, stock: 2 },
];

test('every filter at once, ties in name order', () => {
  expect(filterProducts(products, { minPrice: 40, maxPrice: 100, query: 'LAMP' }).map((p) => p.name)).toEqual([
    'Brass desk lamp',
    'Oak desk lamp',
    'Floor lamp',
  ]);
  expect(filterProducts(products, { inStockOnly: true, query: 'oak  desk' }).map((p) => p.name)).toEqual([
    'Oak desk lamp',
  ]);
});

test('the price bounds are inclusive and no filter keeps everything', () => {
  expect(filterProducts(products, { minPrice: 89, maxPrice: 120 }).map((p) => p.price)).toEqual([89, 120]);
  expect(filterProducts(products, {})).toHaveLength(4);
});
