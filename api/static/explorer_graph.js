// mnemolog explorer: where the neighbourhood's nodes are drawn (a pure function of a page of the neighbourhood).

export const EDGE_COLOURS = 8; // the classes t0…t7 of explorer.css

// A deterministic layout in a drawing width × height: the seed in the middle, each BFS depth on its own ring
// (wider than tall, as the drawing is). The first ring holds its nodes in BFS order; on each ring after it a node
// sits by its parent (the first node it is linked to on the ring within), as near as its neighbours leave room for.
export function layout(nodes, width, height, edges = []) {
  const byDepth = new Map();
  for (const n of nodes) {
    if (!byDepth.has(n.depth)) byDepth.set(n.depth, []);
    byDepth.get(n.depth).push(n);
  }
  const linked = new Map();
  for (const e of edges) {
    for (const [a, b] of [[e.source, e.target], [e.target, e.source]]) {
      if (!linked.has(a)) linked.set(a, []);
      linked.get(a).push(b);
    }
  }
  const rings = [...byDepth.keys()].filter((d) => d > 0).sort((a, b) => a - b);
  const [cx, cy] = [width / 2, height / 2];
  const outer = cy - 30;
  const stretch = (cx - 90) / outer;
  const around = nodes.length - (byDepth.get(0) || []).length;
  const at = new Map();
  const angles = new Map(); // node id -> its angle on its ring
  for (const n of byDepth.get(0) || []) at.set(n.id, [cx, cy]);
  let inside = 0; // nodes on this ring and those within it
  rings.forEach((depth, ring) => {
    const members = byDepth.get(depth);
    inside += members.length;
    // Half by the ring's place, half by the nodes it and those within it hold: a crowded inner ring gets room.
    const radius = outer * (0.5 * ((ring + 1) / rings.length) + 0.5 * Math.sqrt(inside / around));
    const even = (2 * Math.PI) / members.length;
    let placed = members.map((n, i) => [n, i * even + ring * 0.35 - Math.PI / 2]);
    if (ring > 0) {
      const within = new Set(byDepth.get(rings[ring - 1]).map((n) => n.id));
      const parentAngle = (n) => angles.get((linked.get(n.id) || []).find((id) => within.has(id)));
      const wanted = members.map((n) => [n, parentAngle(n)]).filter(([, a]) => a !== undefined).sort((x, y) => x[1] - y[1]);
      // Neighbours on the ring at least 28 px apart, the ring's narrower way too.
      const gap = Math.min(even, 2 * Math.asin(Math.min(1, 14 / (radius * Math.min(1, stretch)))));
      let last = -Infinity;
      const near = wanted.map(([n, a]) => [n, (last = Math.max(a, last + gap))]);
      // Nodes with no parent drawn (or a ring too full to keep near its parents) are spread evenly instead.
      if (near.length === members.length && last - near[0][1] <= 2 * Math.PI - gap) placed = near;
    }
    for (const [n, angle] of placed) {
      angles.set(n.id, angle);
      at.set(n.id, [cx + radius * Math.cos(angle) * stretch, cy + radius * Math.sin(angle)]);
    }
  });
  return at;
}
