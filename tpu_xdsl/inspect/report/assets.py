"""The page's inline assets: its style sheet and its script (pair menu, details panel,
selection across graph and tables, sortable columns, timeline zoom). Nothing is loaded
from the network."""

STYLE = """
:root{--ink:#1d2025;--muted:#5f6670;--line:#d5d9de;--bg:#f6f7f9;--accent:#1f6feb}
*{box-sizing:border-box}
body{margin:0;padding:0 20px 40px;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;
color:var(--ink);background:#fff}
h1{font-size:22px;margin:18px 0 0}h2{font-size:17px;margin:26px 0 4px}
.sub,.hint{color:var(--muted);margin:2px 0 8px}
table{border-collapse:collapse}
.facts th{text-align:left;vertical-align:top;padding:3px 14px 3px 0;white-space:nowrap;color:var(--muted);font-weight:600}
.facts td{padding:3px 0}
nav{margin:10px 0 0}nav a{color:var(--accent)}
.pass{color:#11703a;font-weight:600}.fail{color:#b3261e;font-weight:700}
.scroll{overflow:auto;border:1px solid var(--line);border-radius:6px;background:var(--bg)}
.controls{margin:4px 0 6px}select,button{font:inherit;padding:2px 6px}
.legend{margin:4px 0 8px;display:flex;flex-wrap:wrap;gap:4px 12px;align-items:center}
.key{display:inline-flex;align-items:center;gap:4px;white-space:nowrap}
.key i{display:inline-block;width:16px;height:12px;border:1px solid #888;border-radius:2px}
.key i.outline{background:#fff;border:3px solid #1f77b4}
.graph-row{display:flex;gap:12px;align-items:flex-start}
#graph-box{flex:1;max-height:72vh;min-height:200px}
#graph-svg{display:block;margin:0 auto}
#details{width:300px;flex:none;border:1px solid var(--line);border-radius:6px;padding:8px 10px;max-height:72vh;
overflow:auto;overflow-wrap:anywhere}
#details h3{font-size:14px;margin:0 0 4px}#details h4{font-size:13px;margin:10px 0 2px}#details p{margin:2px 0}
#details table td{padding:1px 8px 1px 0;vertical-align:top}#details .metrics td:last-child{font-variant-numeric:tabular-nums}
.edge{fill:none;stroke:#8a8f98;stroke-width:1.2}
.edge.hl{stroke:var(--accent);stroke-width:2.4}
.node{cursor:pointer}.node text{font-size:11px}.node .op{font-weight:600}.node .cos{font-variant-numeric:tabular-nums}
.node.failing .cos{font-weight:700}.node .gtag{font-size:10px;font-weight:700}
.node.sel rect{stroke:#000;stroke-width:4}.node.member rect{stroke:#000;stroke-dasharray:5 3;stroke-width:3}
.table-box{max-height:60vh;position:relative;background:#fff}
.sortable th{position:sticky;background:#eef1f4;padding:4px 8px;border-bottom:1px solid var(--line);white-space:nowrap}
.sortable thead tr:first-child th{top:0}.sortable thead tr:nth-child(2) th{top:26px}
.sortable thead tr:only-child th{top:0}
.sortable th[data-col]{cursor:pointer;user-select:none}
.sortable th[data-dir=asc]::after{content:" ▲"}.sortable th[data-dir=desc]::after{content:" ▼"}
th.pair{text-align:center;border-left:2px solid var(--line)}.tol{font-weight:400;color:var(--muted)}
.sortable td{padding:2px 8px;border-bottom:1px solid #eceef1;white-space:nowrap;font-variant-numeric:tabular-nums}
.sortable td.name{max-width:360px;overflow:hidden;text-overflow:ellipsis}
.sortable tbody tr{cursor:pointer}.sortable tbody tr:hover{background:#f2f6fc}
.sortable tbody tr.hl{background:#fff3c4}
.sortable td.bar{min-width:90px}
tr.failing td.name{color:#b3261e;font-weight:600}
i.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:5px;border:1px solid #0003}
#timeline-box{background:#fff}
#timeline-svg text{font-size:11px;fill:var(--muted)}#timeline-svg .lane{fill:var(--ink);font-weight:600}
#timeline-svg .axis line{stroke:#e6e8eb}
"""

SCRIPT = r"""
(function(){
const data = JSON.parse(document.getElementById('report-data').textContent);
const svg = document.getElementById('graph-svg');
const details = document.getElementById('details');
const tensorBox = document.getElementById('tensor-box');
const graphBox = document.getElementById('graph-box');
let pair = 0;
const select = document.getElementById('pair-select');
if (select) { pair = +select.value; select.addEventListener('change', () => { pair = +select.value; recolor(); }); }
function recolor(){
  for (const node of svg.querySelectorAll('.node')) {
    const p = data.layers[+node.dataset.node].pairs[pair];
    if (!p) continue;
    node.querySelector('rect').setAttribute('fill', p.fill);
    for (const t of node.querySelectorAll('.op,.cos,.nm')) t.setAttribute('fill', p.ink);
    node.querySelector('.cos').textContent = p.text;
    node.classList.toggle('failing', p.failing);
  }
}
function num(v, d){ if (v === null) return '—'; if (typeof v === 'string') return v; return v.toFixed(d); }
function esc(s){ return String(s).replace(/[&<>"]/g, c => ({'&':'&amp;','<':'&lt;','>':'&gt;','"':'&quot;'}[c])); }
function show(index){
  const layer = data.layers[index];
  let h = '<h3>' + esc(layer.names.join(', ')) + '</h3><table><tr><td>op</td><td>' + esc(layer.op) +
    '</td></tr><tr><td>shape</td><td>' + esc(layer.shape) + '</td></tr>';
  if (layer.group !== null) h += '<tr><td>group</td><td>' + layer.group + ': ' + esc(layer.groupName) + '</td></tr>';
  h += '</table>';
  data.pairs.forEach((title, i) => {
    h += '<h4>' + esc(title) + '</h4>';
    const p = layer.pairs[i];
    if (!p.tensors.length) h += '<p class="hint">not compared</p>';
    for (const t of p.tensors) {
      const mark = t.ok ? '<span class="pass">pass</span>' : '<span class="fail">FAIL</span>';
      h += '<p>' + (layer.names.length > 1 ? esc(t.name) + ' ' : '') + mark + '</p>';
      if (t.problem) { h += '<p>' + esc(t.problem) + '</p>'; continue; }
      h += '<table class="metrics"><tr><td>cosine</td><td>' + num(t.cos, 6) + '</td></tr><tr><td>euclidean</td><td>' +
        num(t.euc, 6) + '</td></tr><tr><td>SQNR</td><td>' + num(t.sqnr, 2) + ' dB</td></tr><tr><td>max |d|</td><td>' +
        (t.maxd === null ? '—' : Number(t.maxd).toPrecision(3)) + '</td></tr></table>';
    }
  });
  details.innerHTML = h;
}
function clearMarks(){
  for (const el of document.querySelectorAll('.node.sel,.node.member,.edge.hl,tr.hl'))
    el.classList.remove('sel', 'member', 'hl');
}
function selectNode(index, scrollTable){
  clearMarks();
  const node = document.getElementById('node-' + index);
  if (!node) return;
  node.classList.add('sel');
  for (const edge of svg.querySelectorAll('.edge[data-from="' + index + '"],.edge[data-to="' + index + '"]'))
    edge.classList.add('hl');
  let first = null;
  for (const row of document.querySelectorAll('#tensor-table tbody tr[data-node="' + index + '"]')) {
    row.classList.add('hl'); first = first || row;
  }
  if (first && scrollTable) tensorBox.scrollTop = first.offsetTop - 60;
  show(index);
}
function scrollToNode(node){
  const box = node.getBBox(), m = node.transform.baseVal.consolidate().matrix;
  graphBox.scrollTop = m.f - graphBox.clientHeight / 2;
  graphBox.scrollLeft = m.e + box.width / 2 - graphBox.clientWidth / 2;
}
svg.addEventListener('click', ev => {
  const node = ev.target.closest('.node');
  if (node) selectNode(+node.dataset.node, true);
});
document.querySelector('#tensor-table tbody').addEventListener('click', ev => {
  const row = ev.target.closest('tr');
  if (!row || row.dataset.node === undefined) return;
  selectNode(+row.dataset.node, false);
  row.classList.add('hl');
  scrollToNode(document.getElementById('node-' + row.dataset.node));
});
const profile = document.querySelector('#profile-table tbody');
if (profile) profile.addEventListener('click', ev => {
  const row = ev.target.closest('tr');
  if (!row) return;
  clearMarks();
  row.classList.add('hl');
  const members = new Set(JSON.parse(row.dataset.members));
  let first = null;
  for (const node of svg.querySelectorAll('.node')) {
    if (data.layers[+node.dataset.node].names.some(n => members.has(n))) { node.classList.add('member'); first = first || node; }
  }
  if (first) scrollToNode(first);
});
function sortBy(th){
  const table = th.closest('table'), body = table.tBodies[0], col = +th.dataset.col;
  const dir = th.dataset.dir === 'asc' ? 'desc' : 'asc';
  for (const h of table.querySelectorAll('th[data-col]')) delete h.dataset.dir;
  th.dataset.dir = dir;
  const sign = dir === 'asc' ? 1 : -1, numeric = th.dataset.type === 'num';
  const key = row => { const c = row.cells[col]; return c.dataset.v !== undefined ? c.dataset.v : c.textContent; };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    if (numeric) {
      if (x === '' || y === '') return (x === '') - (y === '');
      const u = parseFloat(x), v = parseFloat(y);
      return u === v ? 0 : (u < v ? -sign : sign);
    }
    return sign * x.localeCompare(y);
  });
  body.append(...rows);
}
for (const th of document.querySelectorAll('table.sortable th[data-col]')) th.addEventListener('click', () => sortBy(th));
const tl = document.getElementById('timeline-svg');
if (tl) {
  const total = +tl.dataset.total, left = +tl.dataset.left, base = +tl.dataset.width;
  let zoom = 1;
  const label = c => c >= 1e6 ? +(c / 1e6).toPrecision(6) + 'M' : c >= 1e3 ? +(c / 1e3).toPrecision(6) + 'k' : String(c);
  function draw(){
    const width = base * zoom, scale = width / total, h = +tl.getAttribute('height');
    tl.setAttribute('width', left + width + 12);
    for (const r of tl.querySelectorAll('rect')) {
      r.setAttribute('x', left + r.dataset.s * scale);
      r.setAttribute('width', Math.max((r.dataset.f - r.dataset.s) * scale, 0.6));
    }
    const raw = total / Math.max(1, width / 110), power = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    const step = [1, 2, 5, 10].map(m => m * power).find(s => s >= raw);
    let axis = '';
    for (let c = 0; c <= total; c += step) {
      const x = (left + c * scale).toFixed(1);
      axis += '<g data-c="' + c + '"><line x1="' + x + '" x2="' + x + '" y1="16" y2="' + (h - 4) +
        '"/><text x="' + x + '" y="12" text-anchor="middle">' + label(c) + '</text></g>';
    }
    document.getElementById('timeline-axis').innerHTML = axis;
  }
  for (const b of document.querySelectorAll('button[data-zoom]')) b.addEventListener('click', () => {
    const f = +b.dataset.zoom; zoom = f === 0 ? 1 : Math.min(Math.max(zoom * f, 1), 4096); draw();
  });
}
const first = document.getElementById('node-0');
if (first) scrollToNode(first);
document.body.dataset.ready = 'yes';
})();
"""
