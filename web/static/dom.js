// The page's few DOM helpers: find an element by id, make one with
// properties and children.

export const $ = (id) => document.getElementById(id);

export function el(tag, props = {}, ...kids) {
  const e = Object.assign(document.createElement(tag), props);
  e.append(...kids);
  return e;
}
