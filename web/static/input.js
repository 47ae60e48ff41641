// Input: the mouse on the view (orbit, pan, zoom towards the cursor,
// click to pick, double-click to centre, drag a box), its keys (arrows,
// shift and arrows, + and -, F, Enter; Escape leaves Draw box), and the
// panel's buttons and fields.
import { $ } from './dom.js';
import { ray } from './math.js';
import { budgetOf } from './urlstate.js';

const ORBIT = 0.006; // radians per pixel dragged
const CLICK_SLOP = 3; // pixels a click may move and stay a click
const KEY_ORBIT = Math.PI / 36; // radians an arrow key turns the view (5°)
const KEY_PAN = 0.1; // share of the view's height shift and an arrow key pan
const KEY_ZOOM = 1.25; // factor + and - bring the camera closer or further
const KEY_PICK_PX = 40; // how near the middle of the view Enter picks a vertex

export function bindInput(app) {
  const c = app.canvas, cam = app.cam;
  let drag = null;
  const local = (e) => { const r = c.getBoundingClientRect(); return [e.clientX - r.left, e.clientY - r.top]; };
  c.addEventListener('pointerdown', (e) => {
    const [x, y] = local(e);
    drag = { x, y, x0: x, y0: y, pan: e.shiftKey || e.button === 2, moved: false, box: app.box.drawing };
    c.setPointerCapture(e.pointerId);
  });
  c.addEventListener('pointermove', (e) => {
    if (!drag) return;
    const [x, y] = local(e);
    const dx = x - drag.x, dy = y - drag.y;
    if (Math.abs(x - drag.x0) + Math.abs(y - drag.y0) > CLICK_SLOP) drag.moved = true;
    drag.x = x; drag.y = y;
    if (drag.box) { app.box.rubber = [drag.x0, drag.y0, x, y]; app.redraw(); return; }
    if (drag.pan) {
      const { r, u } = cam.basis(), s = cam.dist * 2 * Math.tan(cam.fov / 2) / cam.height;
      for (let i = 0; i < 3; i++) cam.target[i] += (-dx * r[i] + dy * u[i]) * s;
    } else {
      cam.yaw -= dx * ORBIT;
      cam.pitch = Math.max(-1.5707, Math.min(1.5707, cam.pitch + dy * ORBIT));
    }
    app.view.moved();
  });
  c.addEventListener('pointerup', (e) => {
    const d = drag;
    drag = null;
    if (!d) return;
    if (d.box) {
      app.box.rubber = null;
      if (d.moved) app.box.drawn(d.x0, d.y0, d.x, d.y);
      app.box.setDrawing(false);
      app.redraw();
      return;
    }
    if (!d.moved) { const [x, y] = local(e); app.pick.show(app.pick.at(x, y)); }
  });
  c.addEventListener('dblclick', (e) => {
    const [x, y] = local(e), hit = app.pick.at(x, y);
    if (!hit) return;
    cam.target = hit.pos;
    cam.dist *= 0.5;
    app.view.moved();
  });
  c.addEventListener('contextmenu', (e) => e.preventDefault());
  c.addEventListener('wheel', (e) => {
    e.preventDefault();
    const k = Math.exp(Math.max(-1, Math.min(1, e.deltaY * 0.0015)));
    // Zoom towards the point under the cursor (on the plane of the target).
    const [x, y] = local(e);
    app.view.info();
    const { o, d } = ray(cam, x, y), { fw } = cam.basis();
    const t = cam.dist / Math.max(1e-6, d[0] * fw[0] + d[1] * fw[1] + d[2] * fw[2]);
    const p = [o[0] + d[0] * t, o[1] + d[1] * t, o[2] + d[2] * t];
    for (let i = 0; i < 3; i++) cam.target[i] = p[i] + (cam.target[i] - p[i]) * k;
    cam.dist *= k;
    app.view.moved();
  }, { passive: false });
  // The keys do what the mouse does, for those who cannot drag: the
  // arrows orbit (with shift, pan a tenth of the view), + and - zoom
  // about the centre, F frames; handled keys do not scroll the page.
  c.addEventListener('keydown', (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const arrow = { ArrowLeft: [-1, 0], ArrowRight: [1, 0], ArrowUp: [0, -1], ArrowDown: [0, 1] }[e.key];
    if (e.key === 'f' || e.key === 'F') app.view.fit();
    else if (arrow && e.shiftKey) {
      const { r, u } = cam.basis(), s = cam.dist * 2 * Math.tan(cam.fov / 2) * KEY_PAN;
      for (let i = 0; i < 3; i++) cam.target[i] += (arrow[0] * r[i] - arrow[1] * u[i]) * s;
    } else if (arrow) {
      cam.yaw -= arrow[0] * KEY_ORBIT;
      cam.pitch = Math.max(-1.5707, Math.min(1.5707, cam.pitch - arrow[1] * KEY_ORBIT));
    } else if (e.key === 'Enter') {
      // A keyboard user's click: the drawn vertex nearest the middle.
      app.pick.show(app.pick.at(cam.width / 2, cam.height / 2, KEY_PICK_PX));
      e.preventDefault();
      return;
    } else if (e.key === '+' || e.key === '=') cam.dist /= KEY_ZOOM;
    else if (e.key === '-' || e.key === '_') cam.dist *= KEY_ZOOM;
    else return;
    e.preventDefault();
    app.view.moved();
  });
  $('fit').onclick = () => app.view.fit();
  $('vtop').onclick = () => app.view.preset(-Math.PI / 2, 1.5707);
  $('vfront').onclick = () => app.view.preset(-Math.PI / 2, 0);
  $('vside').onclick = () => app.view.preset(0, 0);
  $('budget').onchange = (e) => { app.budget = budgetOf(e.target.value); e.target.value = app.budget; app.writeURL(); app.scheduleUpdate(); };
  $('size').oninput = (e) => { app.size = Number(e.target.value); app.writeURL(); app.redraw(); };
  $('bquery').onclick = () => app.box.query();
  $('bclear').onclick = () => app.box.clear();
  $('bdraw').onclick = () => app.box.setDrawing(!app.box.drawing);
  // Escape, wherever the focus is, leaves Draw box: the next drag orbits.
  window.addEventListener('keydown', (e) => {
    if (e.key !== 'Escape' || !app.box.drawing) return;
    if (drag && drag.box) drag = null;
    app.box.rubber = null;
    app.box.setDrawing(false);
    app.redraw();
  });
  $('pickclose').onclick = () => app.pick.clear();
  $('blevel').onchange = () => app.writeURL();
  $('oquery').onclick = () => app.find.find(true);
  // Enter in a one-line field runs what its button does, as in a form.
  const onEnter = (id, run) => $(id).addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.isComposing) { e.preventDefault(); run(); } });
  onEnter('oid', () => app.find.find(true));
  onEnter('bmin', () => app.box.query());
  onEnter('bmax', () => app.box.query());
  $('addlayer').onclick = () => { const n = $('addstore').value; if (n) { app.addLayer(n); app.writeURL(); } };
  $('paneltoggle').onclick = () => {
    const p = $('panel');
    p.hidden = !p.hidden;
    $('paneltoggle').setAttribute('aria-expanded', String(!p.hidden));
    app.redraw();
    app.scheduleUpdate();
  };
  window.addEventListener('resize', () => { app.redraw(); app.scheduleUpdate(); });
}
