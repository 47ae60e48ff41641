// Placeholder until the viewer lands: lists the stores so the page is useful.
const status = document.getElementById('status');
const sel = document.getElementById('store');
try {
  const r = await fetch('api/v1/stores');
  const cat = await r.json();
  for (const s of cat.stores) sel.add(new Option(`${s.name} (${s.geometry_types.join(', ')})`, s.name));
  status.textContent = `${cat.stores.length} stores`;
} catch (e) {
  status.textContent = 'error: ' + e.message;
  status.className = 'error';
}
