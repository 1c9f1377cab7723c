const { pageLinks } = require('./pager');

test('twenty pages of search results', () => {
  expect(pageLinks(10, 20)).toEqual([1, '…', 9, 10, 11, '…', 20]);
  expect(pageLinks(3, 20)).toEqual([1, 2, 3, 4, '…', 20]);
  expect(pageLinks(19, 20)).toEqual([1, '…', 18, 19, 20]);
});

test('a window wide enough to show every page', () => {
  expect(pageLinks(4, 7, 3)).toEqual([1, 2, 3, 4, 5, 6, 7]);
  expect(pageLinks(2, 2)).toEqual([1, 2]);
});
