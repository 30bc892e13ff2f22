// The admin console. Every action is a call to the admin API with the bearer
// token, so it is checked and audited exactly as through the API.
"use strict";

(() => {
  const { el, clear, text, api, when, span } = seckill;
  const TOKEN_KEY = "seckill.adminToken";
  const $ = (id) => document.getElementById(id);

  let token = sessionStorage.getItem(TOKEN_KEY);
  let nextBefore = null;
  let current = null; // the item open in the detail view
  let live = null; // AbortController of the live stream
  let history = []; // [{t, rate}] of the open item, newest last

  const statusWords = { upcoming: "upcoming", on_sale: "on sale", sold_out: "sold out", ended: "ended" };

  function say(msg) {
    $("status").textContent = msg;
  }

  // call is api() with the token; a refused token signs out.
  async function call(method, path, body) {
    const r = await api(method, path, { token, body });
    if (r.status === 401) {
      signOut("The admin token was refused; sign in again.");
    }
    return r;
  }

  // --- sign in -----------------------------------------------------------

  async function signIn(t) {
    const r = await api("GET", "/api/v1/admin/items?limit=1", { token: t });
    if (r.status === 401) return "That token was refused.";
    if (r.error) return "The service could not check the token: " + r.error.message;
    token = t;
    sessionStorage.setItem(TOKEN_KEY, t);
    $("sign-in").hidden = true;
    $("console").hidden = false;
    $("sign-out").hidden = false;
    loadItems(false);
    return null;
  }

  function signOut(msg) {
    token = null;
    sessionStorage.removeItem(TOKEN_KEY);
    closeDetail();
    $("console").hidden = true;
    $("sign-out").hidden = true;
    $("sign-in").hidden = false;
    $("token").value = "";
    $("sign-in-error").textContent = msg || "";
    say(msg ? "" : "Signed out.");
    $("token").focus();
  }

  $("sign-in-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("sign-in-error").textContent = "";
    const err = await signIn($("token").value.trim());
    if (err) $("sign-in-error").textContent = err;
    else { $("token").value = ""; say("Signed in."); }
  });
  $("sign-out").addEventListener("click", () => signOut());

  // --- items -------------------------------------------------------------

  function windowText(it) {
    if (!it.starts_at && !it.ends_at) return "always open";
    if (!it.ends_at) return "from " + when(it.starts_at);
    if (!it.starts_at) return "until " + when(it.ends_at);
    return when(it.starts_at) + " – " + when(it.ends_at);
  }

  function statusBadge(status) {
    return el("span", { class: "badge badge-" + status }, statusWords[status] || status);
  }

  function itemRow(it) {
    const open = el("button", { type: "button", "aria-label": "Open item " + it.id }, "Open");
    open.addEventListener("click", () => openItem(it.id));
    return el("tr", { "data-id": it.id },
      el("td", { class: "num" }, it.id),
      el("td", { class: "name" }, it.name),
      el("td", null, statusBadge(it.status)),
      el("td", { class: "num" }, it.stock),
      el("td", { class: "num" }, it.sold),
      el("td", { class: "num" }, it.remaining),
      el("td", null, it.strategy),
      el("td", null, windowText(it)),
      el("td", null, open));
  }

  async function loadItems(more) {
    const q = new URLSearchParams({ limit: "50" });
    if ($("filter").value) q.set("status", $("filter").value);
    if (more && nextBefore) q.set("before", String(nextBefore));
    const r = await call("GET", "/api/v1/admin/items?" + q);
    if (r.error) {
      if (r.status !== 401) say("Items could not be loaded: " + r.error.message);
      return;
    }
    const rows = $("item-rows");
    if (!more) clear(rows);
    for (const it of r.data.items) rows.append(itemRow(it));
    nextBefore = r.data.next_before;
    $("more").hidden = !nextBefore;
    $("items-empty").hidden = rows.children.length > 0;
  }

  $("filter").addEventListener("change", () => loadItems(false));
  $("refresh").addEventListener("click", () => loadItems(false));
  $("more").addEventListener("click", () => loadItems(true));

  // --- create ------------------------------------------------------------

  function cents(s) {
    if (s === "") return 0;
    const m = /^(\d+)(?:\.(\d{1,2}))?$/.exec(s);
    if (!m) return null;
    return parseInt(m[1], 10) * 100 + parseInt((m[2] || "0").padEnd(2, "0"), 10);
  }

  function isoOf(local) {
    return local ? new Date(local).toISOString() : undefined;
  }

  $("create-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("create-error").textContent = "";
    const price = cents($("new-price").value.trim());
    if (price === null) {
      $("create-error").textContent = "The price must be a number with at most two decimals, like 12.50.";
      return;
    }
    const body = { name: $("new-name").value, stock: parseInt($("new-stock").value, 10), price_cents: price };
    if ($("new-strategy").value) body.strategy = $("new-strategy").value;
    const starts = isoOf($("new-starts").value), ends = isoOf($("new-ends").value);
    if (starts) body.starts_at = starts;
    if (ends) body.ends_at = ends;
    // A rate gives the item a waiting room; the pass time and the draw
    // then apply (the service's defaults when left as they are).
    if ($("new-room-rate").value !== "") {
      body.waiting_room = { admit_per_second: parseInt($("new-room-rate").value, 10), lottery: $("new-room-lottery").checked };
      if ($("new-room-ttl").value !== "") body.waiting_room.pass_ttl_seconds = parseInt($("new-room-ttl").value, 10);
    }
    const r = await call("POST", "/api/v1/admin/items", body);
    if (r.error) {
      if (r.status !== 401) $("create-error").textContent = "The item was not created: " + r.error.message;
      return;
    }
    $("create-form").reset();
    say("Created item " + r.data.id + ".");
    await loadItems(false);
    openItem(r.data.id);
  });

  // --- detail --------------------------------------------------------------

  async function openItem(id) {
    const r = await call("GET", "/api/v1/admin/items/" + id);
    if (r.error) {
      if (r.status !== 401) say("Item " + id + " could not be loaded: " + r.error.message);
      return;
    }
    closeDetail();
    current = r.data;
    text("d-id", current.id);
    text("d-name", current.name);
    // With an admin listener of its own, the sale pages are on the public
    // one, whose address this page does not know: it names the path.
    const here = document.body.dataset.salePages === "here";
    $("d-sale-link").hidden = !here;
    $("d-sale-path").hidden = here;
    $("d-sale-link").href = "/sale/" + current.id;
    text("d-sale-path", "Sale page: /sale/" + current.id + " on the public listener");
    $("new-stock-value").value = current.stock;
    $("detail").hidden = false;
    $("live-queue").hidden = current.strategy !== "lua-async";
    showRoom(current.waiting_room);
    if (current.waiting_room) $("r-new-rate").value = current.waiting_room.admit_per_second;
    startLive(current.id);
    $("detail-title").scrollIntoView({ block: "start" });
    $("new-stock-value").focus();
  }

  function closeDetail() {
    if (live) live.abort();
    live = null;
    current = null;
    history = [];
    $("detail").hidden = true;
    for (const id of ["stock-error", "dl-result", "rc-drift", "rc-note", "live-rejections-since"]) text(id, "");
    $("dl-table").hidden = true;
    $("dl-empty").hidden = true;
    $("dl-requeue").hidden = true;
    $("rc-result").hidden = true;
    showRoom(null);
    roomSample = null;
    text("room-error", "");
    $("r-new-rate").value = "";
    for (const id of ["live-progress", "live-chart", "live-rejections"]) {
      for (const n of [...$(id).children]) if (n.tagName !== "title") n.remove();
    }
    for (const id of ["live-status", "live-sold", "live-remaining", "live-stock", "live-rate"]) text(id, null);
    text("live-state", "Not connected.");
  }

  $("d-close").addEventListener("click", closeDetail);

  // --- stock ---------------------------------------------------------------

  $("stock-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("stock-error").textContent = "";
    const n = parseInt($("new-stock-value").value, 10);
    const r = await call("PUT", "/api/v1/admin/items/" + current.id + "/stock", { stock: n });
    if (r.status === 409 && r.error.code === "stock_below_sold") {
      const promised = current.strategy === "lua-async" ? " or promised to buyers waiting in the queue" : "";
      $("stock-error").textContent = "The stock cannot be " + n + ": that is fewer units than are already sold" +
        promised + ". Choose a stock at least as large. (" + r.error.message + ")";
      return;
    }
    if (r.error) {
      if (r.status !== 401) $("stock-error").textContent = "The stock was not changed: " + r.error.message;
      return;
    }
    current = r.data;
    say("The stock of item " + current.id + " is now " + current.stock + ".");
    loadItems(false);
  });

  // --- live view (Server-Sent Events over fetch, to send the token) --------

  function startLive(id) {
    live = new AbortController();
    seckillLive.read("/api/v1/admin/items/" + id + "/live", token, live.signal, {
      stats: showStats,
      state: (msg) => text("live-state", msg),
      unauthorized: () => signOut("The admin token was refused; sign in again."),
    });
  }

  const WINDOW_MS = 120000;

  function showStats(ev) {
    const it = ev.item;
    if (!current || it.id !== current.id) return;
    current = Object.assign(current, it);
    const t = Date.parse(ev.at);
    let rate = ev.sold_per_second;
    const last = history[history.length - 1];
    if (rate === null && last && t - last.t < 5000 && t > last.t) {
      rate = (it.sold - last.sold) / ((t - last.t) / 1000); // across a reconnect
    }
    history.push({ t, sold: it.sold, rate: rate === null ? null : Math.max(0, rate) });
    history = history.filter((h) => t - h.t <= WINDOW_MS);

    const row = document.querySelector('#item-rows tr[data-id="' + it.id + '"]');
    if (row) { // the list follows the live view; its button keeps the focus
      const fresh = itemRow(it);
      for (let i = 0; i < 8; i++) row.cells[i].replaceWith(fresh.cells[0]);
    }
    text("live-status", statusWords[it.status] || it.status);
    text("live-sold", it.sold);
    text("live-remaining", it.remaining);
    text("live-stock", it.stock);
    text("live-rate", rate === null ? "–" : rate.toFixed(1));
    seckillLive.progress($("live-progress"), it);
    seckillLive.rate($("live-chart"), history, t, WINDOW_MS);
    text("live-rejections-since", "Counted by this instance since " + when(ev.rejections_since) + ", while a live view is open.");
    seckillLive.rejections($("live-rejections"), ev.rejections);
    // The stats carry the room's counters while the item has one.
    current.waiting_room = ev.waiting_room || null;
    showRoom(current.waiting_room, t);
    if (ev.queue) {
      text("q-queued", ev.queue.queued);
      text("q-unacked", ev.queue.unacked);
      text("q-dead", ev.queue.dead_letters);
      text("q-age", ev.queue.oldest_age_ms > 0 ? span(ev.queue.oldest_age_ms) : "nothing waiting");
    }
  }

  // --- waiting room ----------------------------------------------------------

  const phaseWords = { pre: "before the opening", opening: "drawing", open: "open", closed: "closed: sold out" };

  let roomSample = null; // {t, admitted}: the last live sample, for a rate

  // showRoom shows the item's waiting room (the admin view's waiting_room
  // object), or that it has none; t is the time of a live sample.
  function showRoom(wr, t) {
    $("room-none").hidden = !!wr;
    $("room-info").hidden = !wr;
    $("room-info").dataset.paused = wr ? String(!!wr.paused) : "";
    text("r-set", wr ? "Change the rate" : "Add a waiting room");
    if (!wr) return;
    const phase = wr.closed ? "closed" : wr.phase;
    text("r-phase", phaseWords[phase] || phase);
    text("r-admission", wr.paused ? "paused" : "running");
    text("r-waiting", wr.waiting);
    let measured = wr.admitted_per_second;
    if (typeof measured !== "number" && t && roomSample && t > roomSample.t) {
      measured = Math.max(0, (wr.admitted - roomSample.admitted) / ((t - roomSample.t) / 1000));
    }
    if (t) roomSample = { t, admitted: wr.admitted };
    text("r-rate", typeof measured === "number" ? (Number.isInteger(measured) ? measured : measured.toFixed(1)) : "–");
    text("r-live", wr.live);
    text("r-used", wr.used);
    text("r-expired", wr.expired);
    text("r-tickets", wr.tickets);
    text("r-settings", "Lets in up to " + wr.admit_per_second + " a second; each pass is good for " +
      span(wr.pass_ttl_seconds * 1000) + "; " + (wr.lottery ? "a draw orders those who joined before the opening." : "no draw: first come, first served."));
    text("r-commitment", wr.commitment ? "Draw commitment (SHA-256 of the secret seed): " + wr.commitment : "");
    text("r-pause", wr.paused ? "Resume admission" : "Pause admission");
  }

  // putRoom changes the open item's waiting room and shows the answer.
  async function putRoom(body, done) {
    text("room-error", "");
    const r = await call("PUT", "/api/v1/admin/items/" + current.id + "/waiting-room", body);
    if (r.error) {
      if (r.status !== 401) text("room-error", "The waiting room was not changed: " + r.error.message);
      return;
    }
    // The answer is the item, or its room.
    const wr = r.data && (r.data.waiting_room || (r.data.admit_per_second !== undefined ? r.data : null));
    if (wr) {
      current.waiting_room = wr;
      showRoom(wr);
    }
    say(done);
  }

  $("r-pause").addEventListener("click", () => {
    const pause = !(current.waiting_room && current.waiting_room.paused);
    putRoom({ paused: pause }, pause
      ? "Admission to item " + current.id + " is paused: nobody new is let in; joining still queues."
      : "Admission to item " + current.id + " resumed.");
  });

  $("room-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const n = parseInt($("r-new-rate").value, 10);
    putRoom({ admit_per_second: n }, current.waiting_room
      ? "Item " + current.id + " now lets in up to " + n + " a second."
      : "Item " + current.id + " has a waiting room, letting in up to " + n + " a second.");
  });

  $("r-remove").addEventListener("click", async () => {
    const ok = await confirmAction("Remove the waiting room?",
      "Remove item " + current.id + "'s waiting room? Everyone in line loses their place, and orders no longer need a pass.", "Remove");
    if (!ok) return;
    const r = await call("DELETE", "/api/v1/admin/items/" + current.id + "/waiting-room");
    if (r.error) {
      if (r.status !== 401) text("room-error", "The waiting room was not removed: " + r.error.message);
      return;
    }
    current.waiting_room = null;
    showRoom(null);
    say("Item " + current.id + " has no waiting room any more.");
  });

  // --- confirmation --------------------------------------------------------

  function confirmAction(title, message, okLabel) {
    const d = $("confirm");
    text("confirm-title", title);
    text("confirm-text", message);
    text("confirm-ok", okLabel);
    d.returnValue = "";
    return new Promise((resolve) => {
      d.addEventListener("close", () => resolve(d.returnValue === "ok"), { once: true });
      d.showModal();
      $("confirm-cancel").focus();
    });
  }

  // --- one order: its payments and events ------------------------------------

  function money(amount, currency) {
    return (amount / 100).toFixed(2) + " " + String(currency).toUpperCase();
  }

  async function showOrder(id) {
    $("order-error").textContent = "";
    const r = await call("GET", "/api/v1/admin/orders/" + encodeURIComponent(id));
    if (r.error) {
      $("order-view").hidden = true;
      if (r.status !== 401) $("order-error").textContent = r.status === 404 ? "No such order." : "The order could not be read: " + r.error.message;
      return;
    }
    const o = r.data.order;
    text("o-status", o.status + (o.reason ? " (" + o.reason + ")" : ""));
    text("o-item", o.item_id);
    text("o-user", o.user_id);
    text("o-expires", o.expires_at ? when(o.expires_at) : "no deadline");
    const pays = $("o-pay-rows");
    clear(pays);
    for (const p of r.data.payments) {
      pays.append(el("tr", null, el("td", null, p.event_id), el("td", null, p.type), el("td", { class: "num" }, money(p.amount, p.currency)),
        el("td", null, p.outcome + (p.reason ? ": " + p.reason : "")), el("td", null, when(p.received_at))));
    }
    $("o-pay-table").hidden = r.data.payments.length === 0;
    $("o-pay-empty").hidden = r.data.payments.length > 0;
    const evs = $("o-ev-rows");
    clear(evs);
    for (const e of r.data.events) {
      evs.append(el("tr", null, el("td", null, e.id), el("td", null, e.type), el("td", null, e.status), el("td", null, when(e.at))));
    }
    $("order-view").hidden = false;
  }

  $("order-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const id = $("order-id").value.trim();
    if (id) showOrder(id);
  });

  // --- dead letters --------------------------------------------------------

  async function loadDeadLetters() {
    const r = await call("GET", "/api/v1/admin/items/" + current.id + "/dead-letters");
    if (r.error) {
      if (r.status !== 401) text("dl-result", "Dead letters could not be read: " + r.error.message);
      return null;
    }
    const rows = $("dl-rows");
    clear(rows);
    for (const d of r.data.dead_letters) {
      rows.append(el("tr", null, el("td", null, d.entry), el("td", null, d.order.id), el("td", null, d.order.user_id),
        el("td", null, d.reason), el("td", null, when(d.at))));
    }
    const n = r.data.dead_letters.length;
    $("dl-table").hidden = n === 0;
    $("dl-empty").hidden = n > 0;
    $("dl-requeue").hidden = n === 0;
    return n;
  }

  $("dl-load").addEventListener("click", () => { text("dl-result", ""); loadDeadLetters(); });
  $("dl-requeue").addEventListener("click", async () => {
    const n = $("dl-rows").children.length;
    const ok = await confirmAction("Requeue dead letters?",
      "Move the " + n + " dead letter" + (n === 1 ? "" : "s") + " of item " + current.id +
      " back to its queue? The writers will try to write " + (n === 1 ? "it" : "them") + " to the database again.", "Requeue");
    if (!ok) { text("dl-result", "Nothing was requeued."); return; }
    const r = await call("POST", "/api/v1/admin/items/" + current.id + "/dead-letters/requeue");
    if (r.error) {
      if (r.status !== 401) text("dl-result", "The requeue failed: " + r.error.message);
      return;
    }
    await loadDeadLetters();
    text("dl-result", "Requeued " + r.data.requeued + " order" + (r.data.requeued === 1 ? "" : "s") + ".");
  });

  // --- reconcile -----------------------------------------------------------

  function showReconciliation(rc) {
    const rows = $("rc-rows");
    clear(rows);
    const g = rc.redis;
    const yes = (b) => (b ? "yes" : "no");
    const line = (what, db, gate) => rows.append(el("tr", null, el("th", { scope: "row" }, what),
      el("td", { class: "num" }, db), el("td", { class: "num" }, gate)));
    line("Stock", rc.database.stock, g ? g.stock : "no gate");
    line("Sold (gate: taken)", rc.database.sold, g ? g.taken : "–");
    line("Expected taken", rc.expected_taken, g ? g.taken : "–");
    line("Buyers (live orders)", rc.database.orders, g ? g.buyers : "–");
    line("Failed orders", rc.database.failed_orders, "–");
    if (g) {
      line("Gate present", "–", yes(g.gate_present));
      line("Sold-out mark", "–", yes(g.sold_out_mark));
      if (rc.strategy === "lua-async") {
        line("Queued", "–", g.queued);
        line("Dead letters", "–", g.dead_letters);
      } else {
        line("Reserved (in flight)", "–", g.reserved);
        line("Orphaned reservations", "–", g.orphaned);
      }
    }
    const list = $("rc-drift-list");
    clear(list);
    for (const d of rc.drift) list.append(el("li", null, d));
    let verdict = rc.drift.length === 0 ? "No drift: the database and the gate agree." : "Drift found (" + rc.drift.length + "):";
    if (rc.repaired) verdict = "Repaired. " + verdict;
    text("rc-drift", verdict);
    $("rc-drift").dataset.drift = String(rc.drift.length);
    text("rc-note", rc.note || "");
    $("rc-result").hidden = false;
  }

  $("rc-dry").addEventListener("click", async () => {
    const r = await call("POST", "/api/v1/admin/items/" + current.id + "/reconcile?dry_run=true");
    if (r.error) {
      if (r.status !== 401) text("rc-drift", "The dry run failed: " + r.error.message);
      return;
    }
    showReconciliation(r.data);
  });

  $("rc-repair").addEventListener("click", async () => {
    const ok = await confirmAction("Repair the gate?",
      "Rewrite item " + current.id + "'s gate in Redis from the database, where that is safe? The database is not changed.", "Repair");
    if (!ok) return;
    const r = await call("POST", "/api/v1/admin/items/" + current.id + "/reconcile");
    if (r.error) {
      if (r.status !== 401) text("rc-drift", "The repair failed: " + r.error.message);
      return;
    }
    showReconciliation(r.data);
  });

  // --- start ---------------------------------------------------------------

  if (token) {
    signIn(token).then((err) => { if (err) signOut(err); });
  } else {
    $("token").focus();
  }
})();
