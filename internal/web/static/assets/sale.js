// The sale page: the item's public view, a countdown to its start, and a Buy
// button. It reads the same public API as any client.
"use strict";

(() => {
  const { el, clear, text, api, money, when, span } = seckill;
  const itemID = location.pathname.replace(/^\/sale\//, "");
  const tokenMode = document.body.dataset.auth === "user-token";
  const result = document.getElementById("result");
  let item = null;
  let skew = 0; // server clock minus this one, from the Date header (ms)

  document.getElementById("user-id-field").hidden = tokenMode;
  document.getElementById("user-token-field").hidden = !tokenMode;
  document.getElementById(tokenMode ? "user-token" : "user-id").required = true;

  const refusals = {
    sold_out: "Sorry, it is sold out: every unit has been bought.",
    already_purchased: "You have already bought this item. It is one per person.",
    sale_not_started: "The sale has not started yet. Try again when the countdown ends.",
    sale_ended: "The sale has ended; it can no longer be bought.",
  };

  async function load() {
    const r = await api("GET", "/api/v1/items/" + encodeURIComponent(itemID));
    if (r.status === 404) {
      text("name", "No such item");
      document.getElementById("buy").disabled = true;
      return;
    }
    if (r.error) {
      text("countdown", "The item could not be loaded (" + r.error.message + "). Retrying…");
      return;
    }
    item = r.data;
    const served = Date.parse(r.headers.get("Date") || "");
    // The header has whole seconds: only a clock off by more is corrected.
    if (!Number.isNaN(served)) skew = Math.abs(served - Date.now()) > 2000 ? served - Date.now() : 0;
    document.title = item.name + " – flash sale";
    text("name", item.name);
    text("price", "Price: " + money(item.price_cents));
    text("remaining", item.remaining);
    text("remaining-label", item.remaining === 1 ? "unit left" : "units left");
    tick();
  }

  function tick() {
    if (!item) return;
    const now = Date.now() + skew;
    const starts = item.starts_at ? Date.parse(item.starts_at) : null;
    const ends = item.ends_at ? Date.parse(item.ends_at) : null;
    const c = document.getElementById("countdown");
    if (starts !== null && now < starts) {
      c.textContent = "Starts in " + span(starts - now) + " (" + when(item.starts_at) + ")";
      c.dataset.phase = "upcoming";
    } else if (ends !== null && now >= ends) {
      c.textContent = "The sale ended on " + when(item.ends_at) + ".";
      c.dataset.phase = "ended";
    } else {
      c.textContent = "On sale now" + (ends !== null ? "; ends in " + span(ends - now) + "." : ".");
      c.dataset.phase = "open";
    }
  }

  function show(outcome, title, ...lines) {
    clear(result);
    result.dataset.outcome = outcome;
    result.append(el("p", { class: "outcome" }, el("strong", null, title)));
    for (const l of lines) result.append(el("p", null, l));
  }

  function orderLines(o) {
    const lines = ["Order " + o.id + " for " + o.user_id + "."];
    if (o.expires_at) lines.push("Pay by " + when(o.expires_at) + ", or it is cancelled.");
    return lines;
  }

  function auth() {
    return tokenMode ? document.getElementById("user-token").value.trim() : undefined;
  }

  async function follow(order) {
    const deadline = Date.now() + 60000;
    while (Date.now() < deadline) {
      await new Promise((ok) => setTimeout(ok, 500));
      const r = await api("GET", "/api/v1/orders/" + encodeURIComponent(order.id), { token: auth() });
      if (r.status !== 200) continue; // a blip: keep asking until the deadline
      const o = r.data;
      if (o.status === "pending") continue;
      if (o.status === "failed") {
        const why = refusals[o.reason] || "The reason given is " + (o.reason || "unknown") + ".";
        show("failed", "Your order failed.", "Order " + o.id + " was queued but could not be recorded. " + why);
      } else {
        show("created", "It's yours!", ...orderLines(o));
      }
      load();
      return;
    }
    show("queued", "Still in the queue.", "Order " + order.id + " is queued; check it again later.");
  }

  async function buy(ev) {
    ev.preventDefault();
    const button = document.getElementById("buy");
    button.disabled = true;
    show("sending", "Sending your order…");
    try {
      const opts = tokenMode
        ? { token: auth(), body: {} }
        : { body: { user_id: document.getElementById("user-id").value.trim() } };
      const r = await api("POST", "/api/v1/items/" + encodeURIComponent(itemID) + "/orders", opts);
      if (r.status === 201) {
        show("created", "It's yours!", ...orderLines(r.data));
      } else if (r.status === 202) {
        show("queued", "Queued: your order is in line.", "Order " + r.data.id + " was accepted and is being recorded; this page checks it for you.");
        await follow(r.data);
      } else if (r.status === 409 && refusals[r.error.code]) {
        show(r.error.code, refusals[r.error.code]);
      } else if (r.status === 429) {
        const wait = parseInt(r.headers.get("Retry-After") || "1", 10);
        show("rate_limited", "Too many tries.", "Please wait " + wait + (wait === 1 ? " second" : " seconds") + " before trying again.");
      } else if (r.status === 401) {
        show("unauthorized", "Your user token was refused.", "Check the token and try again.");
      } else if (r.status === 0 || r.status === 503) {
        show("unavailable", "The shop is busy right now.", "Nothing was bought. Please try again in a moment.");
      } else {
        show(r.error.code, "The order was not accepted.", r.error.message);
      }
    } finally {
      button.disabled = false;
      load();
      // The service serves this view from memory for up to about 250 ms
      // (see the README), so read it once more after that to show this
      // purchase in the count.
      setTimeout(load, 400);
    }
  }

  document.getElementById("buy-form").addEventListener("submit", buy);
  load();
  setInterval(tick, 1000);
  // Every open page reads the item; every 5 seconds, and not while hidden,
  // keeps a crowd of waiting buyers from costing much.
  setInterval(() => { if (!document.hidden) load(); }, 5000);
})();
