const { pageLinks } = require('./pager');

test('browsing ten pages of lamps', () => {
  expect([pageLinks(1, 10), pageLinks(5, 10), pageLinks(10, 10)]).toEqual([
    [1, 2, '…', 10],
    [1, '…', 4, 5, 6, '…', 10],
    [1, '…', 9, 10],
  ]);
});

test('a wider window of two pages around the current one', () => {
  expect([pageLinks(2, 9, 2), pageLinks(6, 9, 2), pageLinks(9, 9, 2)]).toEqual([
    [1, 2, 3, 4, '…', 9],
    [1, '…', 4, 5, 6, 7, 8, 9],
    [1, '…', 7, 8, 9],
  ]);
});

test('short result lists and a gap of a single page', () => {
  expect([pageLinks(1, 3), pageLinks(4, 6), pageLinks(2, 5), pageLinks(1, 1)]).toEqual([
    [1, 2, 3],
    [1, '…', 3, 4, 5, 6],
    [1, 2, 3, '…', 5],
    [1],
  ]);
});
