const { filterProducts } = require('./filter');

const products = [
  { name: 'Watering Can', price: 18, stock: 1 },
  { name: 'Garden Trowel', price: 12, stock: 0 },
  { name: 'Garden Hose 25m', price: 30, stock: 2 },
  { name: 'Pruning Shears', price: 24, stock: 1 },
  { name: 'Garden Gloves', price: 12, stock: 9 },
  { name: 'Garden Kneeler', price: 18, stock: 0 },
  { name: 'Seed Tray', price: 5, stock: 12 },
  { name: 'Garden Twine', price: 3, stock: 1 },
];

const names = (found) => found.map((product) => product.name);

test('in-stock tools within a budget', () => {
  expect(names(filterProducts(products, { minPrice: 12, maxPrice: 24, inStockOnly: true }))).toEqual([
    'Garden Gloves',
    'Watering Can',
    'Pruning Shears',
  ]);
});

test('searching for garden products, in stock or not', () => {
  expect(names(filterProducts(products, { minPrice: 12, maxPrice: 24, query: 'GARDEN' }))).toEqual([
    'Garden Gloves',
    'Garden Trowel',
    'Garden Kneeler',
  ]);
  expect(names(filterProducts(products, { maxPrice: 12, inStockOnly: true, query: ' garden ' }))).toEqual([
    'Garden Twine',
    'Garden Gloves',
  ]);
});

test('the cheapest things that can be sent today', () => {
  expect(names(filterProducts(products, { minPrice: 5, maxPrice: 18, inStockOnly: true }))).toEqual([
    'Seed Tray',
    'Garden Gloves',
    'Watering Can',
  ]);
});
