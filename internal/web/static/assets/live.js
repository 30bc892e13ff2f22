// The console's live view: a reader of the Server-Sent Events stream (over
// fetch, which can send the bearer token; EventSource cannot) and the SVG
// charts it feeds. Labels are SVG text set with textContent.
"use strict";

const seckillLive = (() => {
  const { svg } = seckill;

  // read streams url's events until signal aborts, reconnecting after the
  // stream's retry interval. on: {stats(data), state(message), unauthorized()}.
  async function read(url, token, signal, on) {
    let retry = 1000;
    while (!signal.aborted) {
      try {
        const res = await fetch(url, { headers: { Authorization: "Bearer " + token, Accept: "text/event-stream" },
          signal, cache: "no-store", credentials: "omit" });
        if (res.status === 401) { on.unauthorized(); return; }
        if (!res.ok) {
          on.state("Live view unavailable (HTTP " + res.status + "); retrying.");
        } else {
          on.state("Live: updated every second.");
          const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += value.replace(/\r\n?/g, "\n");
            let i;
            while ((i = buf.indexOf("\n\n")) >= 0) {
              const ev = parseEvent(buf.slice(0, i));
              buf = buf.slice(i + 2);
              if (ev.retry) retry = ev.retry;
              if (ev.event === "stats") on.stats(JSON.parse(ev.data));
              if (ev.event === "problem") on.state("The item could not be read just now; retrying.");
            }
          }
        }
      } catch (err) {
        if (signal.aborted) return;
        on.state("Live view disconnected; reconnecting.");
      }
      await new Promise((ok) => setTimeout(ok, retry));
    }
  }

  // parseEvent reads one event block of the text/event-stream format.
  function parseEvent(block) {
    const ev = { event: "message", data: "" };
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "event") ev.event = value;
      else if (field === "data") data.push(value);
      else if (field === "retry" && /^\d+$/.test(value)) ev.retry = parseInt(value, 10);
    }
    ev.data = data.join("\n");
    return ev;
  }

  function reset(svgEl) {
    for (const n of [...svgEl.children]) if (n.tagName !== "title") n.remove();
  }

  // width is the drawing width of a chart: its width on screen, so text keeps
  // its size on a phone, within 300 to 600 units.
  function width(svgEl, height) {
    const W = Math.max(300, Math.min(600, Math.round(svgEl.getBoundingClientRect().width) || 600));
    svgEl.setAttribute("viewBox", "0 0 " + W + " " + height);
    return W;
  }

  // progress draws sold of stock as a bar, with the numbers written on it.
  function progress(s, it) {
    reset(s);
    const W = width(s, 56), frac = it.stock > 0 ? Math.min(1, it.sold / it.stock) : 1;
    s.append(svg("rect", { x: 0, y: 0, width: W, height: 28, rx: 4, class: "track" }));
    s.append(svg("rect", { x: 0, y: 0, width: Math.round(W * frac), height: 28, rx: 4, class: "fill" }));
    const pct = it.stock > 0 ? Math.round(100 * it.sold / it.stock) : 100;
    s.append(svg("text", { x: 8, y: 19, class: "on-bar" }, it.sold + " sold of " + it.stock + " (" + pct + "%)"));
    s.append(svg("text", { x: W, y: 48, "text-anchor": "end", class: "label" }, it.remaining + " remaining"));
  }

  // rate draws history ([{t, rate}], rate null when unknown) over the last
  // windowMs before now as a line with its area.
  function rate(s, history, now, windowMs) {
    reset(s);
    const W = width(s, 200);
    const L = 44, R = W - 10, T = 10, B = 170;
    const pts = history.filter((h) => h.rate !== null);
    const top = niceMax(Math.max(1, ...pts.map((p) => p.rate)));
    const x = (t) => L + (R - L) * (1 - (now - t) / windowMs);
    const y = (v) => B - (B - T) * (v / top);
    for (const v of [0, top / 2, top]) {
      s.append(svg("line", { x1: L, x2: R, y1: y(v), y2: y(v), class: "grid" }));
      s.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", class: "label" }, fmtNum(v)));
    }
    const mins = Math.round(windowMs / 60000);
    for (const [label, ago, anchor] of [[mins + " min ago", windowMs, "start"], [mins / 2 + " min ago", windowMs / 2, "middle"], ["now", 0, "end"]]) {
      s.append(svg("text", { x: x(now - ago), y: 192, "text-anchor": anchor, class: "label" }, label));
    }
    if (pts.length === 0) {
      s.append(svg("text", { x: (L + R) / 2, y: 95, "text-anchor": "middle", class: "label" }, "waiting for a second sample…"));
      return;
    }
    const line = pts.map((p) => x(p.t).toFixed(1) + "," + y(p.rate).toFixed(1)).join(" ");
    const area = x(pts[0].t).toFixed(1) + "," + B + " " + line + " " + x(pts[pts.length - 1].t).toFixed(1) + "," + B;
    s.append(svg("polygon", { points: area, class: "area" }));
    s.append(svg("polyline", { points: line, class: "line" }));
    const last = pts[pts.length - 1];
    s.append(svg("circle", { cx: x(last.t), cy: y(last.rate), r: 4, class: "dot" }));
  }

  function niceMax(v) {
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 5, 10]) if (v <= m * p) return m * p;
    return 10 * p;
  }

  function fmtNum(v) {
    return v >= 10 || Number.isInteger(v) ? String(Math.round(v)) : v.toFixed(1);
  }

  const reasonWords = {
    sold_out: "sold out", already_purchased: "already bought", sale_not_started: "not started",
    sale_ended: "ended", rate_limited: "rate limited", unavailable: "unavailable (503)",
    invalid_request: "bad request", unauthorized: "bad user token", idempotency_conflict: "key reused",
  };

  // rejections draws refused orders by code ({code: n}) as labelled bars,
  // most first; each count carries its code in data-code.
  function rejections(s, counts) {
    reset(s);
    const rows = Object.entries(counts || {}).sort((a, b) => b[1] - a[1]);
    if (rows.length === 0) {
      width(s, 30);
      s.append(svg("text", { x: 0, y: 20, class: "label" }, "No order refused."));
      return;
    }
    const H = 28, max = Math.max(...rows.map((r) => r[1]));
    const W = width(s, rows.length * H), bars = W - 220;
    rows.forEach(([code, n], i) => {
      const w = Math.max(2, Math.round(bars * n / max));
      s.append(svg("text", { x: 140, y: i * H + 18, "text-anchor": "end", class: "label" }, reasonWords[code] || code));
      s.append(svg("rect", { x: 150, y: i * H + 5, width: w, height: 18, rx: 3, class: "bar bar-" + code }));
      s.append(svg("text", { x: 156 + w, y: i * H + 18, class: "label value", "data-code": code }, n));
    });
  }

  return { read, progress, rate, rejections };
})();
