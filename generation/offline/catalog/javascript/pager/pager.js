'use strict';

function pageLinks(current, total, around = 1) {
  const links = [];
  let previous = null;
  for (let page = 1; page <= total; page++) {
    const near = page >= current - around && page <= current + around;
    if (page === 1 || page === total || near) {
      if (previous !== null && page - previous > 1) {
        links.push('…');
      }
      links.push(page);
      previous = page;
    }
  }
  return links;
}

module.exports = { pageLinks };
