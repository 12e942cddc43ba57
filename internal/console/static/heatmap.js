// The fleet calendar's heat map, drawn on a canvas: one row per GPU model
// and zone, one column per hour in view, coloured by the share of GPUs
// free; the team's blocks as bars over it, other teams' as a grey strip
// (a count, never who), failed nodes as a red edge.

export const rowHeight = 48;

// labelWidth is the width of the pool names' column: narrower on a phone.
export function labelWidth(width) { return width < 600 ? 96 : 132; }
const axisHeight = 26;

// heat is the colour of a share of free GPUs, from dark red (none) through
// amber to green (all): readable as a ramp, and legible under the labels.
export function heat(share) {
  const s = Math.max(0, Math.min(1, share));
  const hue = Math.round(s * 120);
  return `hsl(${hue} 70% ${38 + Math.round(s * 8)}%)`;
}

// draw paints cal (GET /v1/fleet-calendar) over the hours [view.first,
// view.first + view.hours) on canvas, with the cursor cell outlined, and
// returns the milliseconds it took.
export function draw(canvas, cal, view, cursor) {
  const t0 = performance.now();
  const dpr = window.devicePixelRatio || 1;
  const width = canvas.clientWidth;
  const lw = labelWidth(width);
  const height = axisHeight + cal.pools.length * rowHeight;
  canvas.height = Math.round(height * dpr);
  canvas.width = Math.round(width * dpr);
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d", { alpha: false });
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.fillStyle = "#ffffff";
  ctx.fillRect(0, 0, width, height);
  const plotW = Math.max(1, width - lw);
  const cellW = plotW / view.hours;
  const from = Date.parse(cal.from);
  const hourMs = 3600e3;

  // 1. The time axis: a tick per day, labelled when there is room.
  ctx.font = "12px system-ui, sans-serif";
  ctx.textBaseline = "middle";
  const dayEvery = cellW * 24 < 40 ? 7 : 1;
  for (let k = 0; k < view.hours; k++) {
    const h = view.first + k;
    const t = new Date(from + h * hourMs);
    const x = lw + k * cellW;
    if (t.getUTCHours() === 0 && (dayEvery === 1 || t.getUTCDay() === 1)) {
      ctx.fillStyle = "#1f2933";
      ctx.fillRect(x, axisHeight - 8, 1, 8);
      ctx.fillText(t.toLocaleDateString("en-GB", { day: "numeric", month: "short", timeZone: "UTC" }), x + 3, 9);
    } else if ((cellW >= 30 && t.getUTCHours() % 2 === 0) || (cellW >= 14 && t.getUTCHours() % 6 === 0)) {
      ctx.fillStyle = "#52606d";
      ctx.fillRect(x, axisHeight - 4, 1, 4);
      ctx.fillText(`${String(t.getUTCHours()).padStart(2, "0")}h`, x + 2, 18);
    }
  }

  // 2. Per pool: the heat, other teams' share, the team's bars.
  cal.pools.forEach((p, r) => {
    const y = axisHeight + r * rowHeight;
    const heatH = rowHeight - 6;
    let run = -1, runColor = "";
    // Adjacent hours of one colour are painted as one rectangle.
    const flush = (end) => {
      if (run < 0) return;
      ctx.fillStyle = runColor;
      ctx.fillRect(lw + run * cellW, y, (end - run) * cellW + 0.5, heatH);
    };
    for (let k = 0; k < view.hours; k++) {
      const h = view.first + k;
      const c = h < p.free.length && p.gpus > 0 ? heat(p.free[h] / p.gpus) : "#cbd2d9";
      if (c !== runColor) { flush(k); run = k; runColor = c; }
    }
    flush(view.hours);
    ctx.fillStyle = "#3e4c59";
    for (let k = 0; k < view.hours; k++) {
      const h = view.first + k;
      const taken = h < p.taken.length ? p.taken[h] : 0;
      if (taken > 0) {
        const th = Math.max(2, Math.round((taken / p.gpus) * 12));
        ctx.fillRect(lw + k * cellW, y + heatH - th, cellW + 0.5, th);
      }
    }
    const lanes = [];
    for (const b of p.blocks) {
      const s = (Date.parse(b.startTime) - from) / hourMs - view.first;
      const e = (Date.parse(b.endTime) - from) / hourMs - view.first;
      if (e <= 0 || s >= view.hours) continue;
      let lane = lanes.findIndex((end) => end <= s);
      if (lane < 0) { lane = lanes.length; lanes.push(e); } else lanes[lane] = e;
      lane %= 3;
      const x0 = lw + Math.max(0, s) * cellW, x1 = lw + Math.min(view.hours, e) * cellW;
      const by = y + 4 + lane * 11;
      ctx.fillStyle = b.state === "active" ? "#1d4ed8" : "#3b82f6";
      ctx.fillRect(x0, by, Math.max(2, x1 - x0), 9);
      ctx.strokeStyle = "#0b1f4d";
      ctx.strokeRect(x0 + 0.5, by + 0.5, Math.max(1, x1 - x0 - 1), 8);
    }
    // The label, with the failed nodes marked in red.
    ctx.fillStyle = "#f5f7fa";
    ctx.fillRect(0, y, lw, rowHeight);
    ctx.fillStyle = "#1f2933";
    ctx.font = "bold 13px system-ui, sans-serif";
    ctx.fillText(`${p.gpuModel} · ${p.zone}`, 6, y + 12);
    ctx.font = "12px system-ui, sans-serif";
    ctx.fillText(`${p.gpus} GPUs`, 6, y + 26);
    if (p.unhealthy.length > 0) {
      ctx.fillStyle = "#b91c1c";
      ctx.fillText(`✖ ${p.unhealthy.length} failed`, 6, y + 39);
      ctx.fillRect(lw, y, plotW, 3);
    }
  });

  // 3. The cursor, where the keyboard is.
  if (cursor) {
    const x = lw + (cursor.hour - view.first) * cellW;
    const y = axisHeight + cursor.row * rowHeight;
    ctx.strokeStyle = "#000000";
    ctx.lineWidth = 2;
    ctx.strokeRect(x + 1, y + 1, Math.max(3, cellW - 2), rowHeight - 8);
    ctx.lineWidth = 1;
  }
  const ms = performance.now() - t0;
  canvas.dataset.drawMs = ms.toFixed(2);
  return ms;
}

// cellAt maps a point on the canvas to a pool row and an hour.
export function cellAt(canvas, cal, view, x, y) {
  const lw = labelWidth(canvas.clientWidth);
  const plotW = canvas.clientWidth - lw;
  const row = Math.floor((y - axisHeight) / rowHeight);
  const k = Math.floor(((x - lw) / plotW) * view.hours);
  if (row < 0 || row >= cal.pools.length || k < 0 || k >= view.hours) return null;
  return { row, hour: view.first + k };
}
