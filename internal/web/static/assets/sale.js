// The sale page: the item's public view, a countdown to its start, and a Buy
// button. It reads the same public API as any client. An item with a
// waiting room is bought in turn: the page joins the queue (queue.js), shows
// the place live, and turns into the Buy button, which sends the pass, when
// the ticket is admitted.
"use strict";

(() => {
  const { el, clear, text, api, money, when, span } = seckill;
  const $ = (id) => document.getElementById(id);
  const itemID = location.pathname.replace(/^\/sale\//, "");
  const tokenMode = document.body.dataset.auth === "user-token";
  const result = $("result");
  let item = null;
  let skew = 0; // server clock minus this one, from the Date header (ms)
  // The waiting room: the ticket this tab holds ({ticket, user}), its
  // poller, and its last status.
  let ticket = null;
  let poller = null;
  let status = null;
  let expiryPolled = false; // the page asked for a poll when the pass ran out

  $("user-id-field").hidden = tokenMode;
  $("user-token-field").hidden = !tokenMode;
  $(tokenMode ? "user-token" : "user-id").required = true;

  const refusals = {
    sold_out: "Sorry, it is sold out: every unit has been bought.",
    already_purchased: "You have already bought this item. It is one per person.",
    sale_not_started: "The sale has not started yet. Try again when the countdown ends.",
    sale_ended: "The sale has ended; it can no longer be bought.",
  };

  // The refusals of an order's pass (403), each with what to do.
  const passRefusals = {
    pass_required: ["This sale has a waiting room.", "Join the queue; the Buy button appears when it is your turn."],
    pass_invalid: ["Your pass was not accepted.", "This page fetches your pass again; try once more in a moment."],
    pass_expired: ["Your pass expired before the order arrived.", "Your turn has passed; the next person in line is let in."],
    pass_wrong_user: ["Your pass belongs to another user.", "Buy as the user id that joined the queue."],
    pass_wrong_item: ["Your pass is for another item.", "Open the sale page of the item you queued for."],
  };

  async function load() {
    const r = await api("GET", "/api/v1/items/" + encodeURIComponent(itemID));
    if (r.status === 404) {
      text("name", "No such item");
      $("buy").disabled = true;
      $("join").disabled = true;
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
    // A ticket's status is newer than the item view once it says so.
    if (!(status && status.state === "sold_out")) showRemaining(item.remaining);
    if (item.waiting_room && !ticket) resume();
    if (!item.waiting_room && ticket) leave(); // the room was turned off
    renderRoom();
    tick();
  }

  function showRemaining(n) {
    text("remaining", n);
    text("remaining-label", n === 1 ? "unit left" : "units left");
  }

  function tick() {
    if (!item) return;
    const now = Date.now() + skew;
    const starts = item.starts_at ? Date.parse(item.starts_at) : null;
    const ends = item.ends_at ? Date.parse(item.ends_at) : null;
    const c = $("countdown");
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
    tickPass(now);
  }

  // tickPass counts down the admitted ticket's pass; when it runs out the
  // page asks for the ticket's status at once (it reads expired).
  function tickPass(now) {
    const p = $("pass-expiry");
    if (!status || status.state !== "admitted" || !status.pass_expires_at) {
      p.hidden = true;
      return;
    }
    const left = Date.parse(status.pass_expires_at) - now;
    p.hidden = false;
    if (left > 0) {
      p.textContent = "Your pass is good for " + span(left) + " more (until " + when(status.pass_expires_at) + ").";
      p.dataset.expired = "false";
    } else {
      p.textContent = "Your pass has run out.";
      p.dataset.expired = "true";
      if (!expiryPolled && poller) { expiryPolled = true; poller.now(); }
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
    return tokenMode ? $("user-token").value.trim() : undefined;
  }

  // --- the waiting room ----------------------------------------------------

  // resume follows the ticket this tab already holds (a reload keeps the
  // place).
  function resume() {
    const t = seckillQueue.stored(itemID);
    if (t) start(t);
  }

  // start follows ticket t; first is its status when just read.
  function start(t, first) {
    ticket = t;
    status = null;
    if (!tokenMode) {
      $("user-id").value = t.user;
      $("user-id").readOnly = true; // the place is this user's
    }
    poller = seckillQueue.follow(itemID, t.ticket, auth, {
      status: onStatus,
      problem: (r, wait) => {
        const why = r.status === 429 ? "too many requests" : r.status === 0 ? "no connection" : "the queue is busy";
        $("room-state").dataset.problem = "true";
        text("room-state", "Your place could not be read just now (" + why + "); trying again in " +
          span(wait + 999) + ". Your place is kept.");
      },
      lost: () => {
        leave();
        renderRoom();
        show("lost", "Your place in the queue was not found.", "Join the queue again.");
      },
    }, first);
    renderRoom();
  }

  // leave stops following the ticket (the room is gone, or the ticket).
  function leave() {
    if (poller) poller.stop();
    poller = null;
    ticket = null;
    status = null;
    seckillQueue.forget(itemID);
    $("user-id").readOnly = false;
  }

  function onStatus(st) {
    const was = status ? status.state : null;
    status = st;
    if (st.state !== "admitted") expiryPolled = false;
    if (Number.isInteger(st.remaining)) showRemaining(st.state === "sold_out" || st.state === "held" ? 0 : st.remaining);
    if (st.state === "sold_out" && was !== "sold_out" && result.dataset.outcome !== "created") {
      show("sold_out", refusals.sold_out, "Nobody else will be let in: there is nothing left to buy.");
    }
    if (st.state === "expired" && was !== "expired") {
      show("expired", "Your pass expired before you bought.", "Your turn has passed, and your place went to the next in line.");
    }
    renderRoom();
    if (st.state === "admitted" && was !== "admitted") {
      clear(result);
      delete result.dataset.outcome;
      $("buy").focus();
    }
  }

  // etaWords is an ETA in seconds, rounded as an estimate should be.
  function etaWords(s) {
    if (s < 0) return "not known yet";
    if (s === 0) return "any moment";
    if (s < 60) return "about " + s + "s";
    if (s < 3600) return "about " + Math.round(s / 60) + " min";
    const m = Math.round(s / 600) * 10; // to 10 minutes
    return "about " + Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
  }

  // renderRoom shows the room's part of the page from the item view and the
  // ticket's last status; #room's data-state names what it shows.
  function renderRoom() {
    const wr = item && item.waiting_room;
    const room = $("room");
    room.hidden = !wr;
    const admitted = !!(status && status.state === "admitted" && status.pass);
    $("join").hidden = !wr || !!ticket;
    $("buy").hidden = !!wr && !admitted;
    if (!wr) return;
    text("room-note", wr.lottery
      ? "Everyone who joins before the opening is put in a random order by a draw anyone can check; later arrivals queue behind them. Each is let in to buy in turn."
      : "Everyone is let in to buy in turn, in the order they joined.");
    const state = !ticket ? "none" : !status ? "joining" : status.state === "waiting" && !status.drawn ? "pre" : status.state;
    room.dataset.state = state;
    delete $("room-state").dataset.problem;
    $("room-place").hidden = !(state === "waiting" || state === "pre");
    const words = {
      none: "Join the queue to get your place.",
      joining: "Taking your place…",
      pre: "You are in the queue, ticket " + (status && status.number) + ". At the opening a draw sets everyone's place; it shows here then. Keep this page open.",
      waiting: "You are in line. Keep this page open: the Buy button appears when it is your turn.",
      admitted: "It's your turn! Buy now, before your pass runs out.",
      used: "Your pass was used: your order was placed.",
      expired: "Your turn has passed: your pass expired unused.",
      sold_out: "Sold out: every unit has been bought.",
      held: "Sold out for now: some buyers have not paid yet. Keep this page open: if a unit comes back, the line moves on.",
      ended: "The sale has ended: nobody else will be let in.",
    };
    // A live region: written only when it changes, so a screen reader
    // says each news once, not at every poll.
    const say = words[state] || "Your ticket is " + state + ".";
    if ($("room-state").textContent !== say) text("room-state", say);
    if (state === "pre") {
      text("q-position", "–");
      text("q-ahead", "–");
      text("q-eta", "after the draw");
    } else if (state === "waiting") {
      text("q-position", status.position);
      text("q-ahead", status.ahead);
      text("q-eta", etaWords(status.eta_seconds));
    }
    tick();
  }

  async function join() {
    const user = tokenMode ? "" : $("user-id").value.trim();
    const button = $("join");
    button.disabled = true;
    show("joining", "Joining the queue…");
    try {
      const r = await seckillQueue.join(itemID, user, auth(), {
        solving: () => show("joining", "Joining the queue…", "Your browser is solving a small puzzle the shop asks of everyone in line; it takes a few seconds."),
      });
      if (r.status === 200) {
        clear(result);
        delete result.dataset.outcome;
        start(seckillQueue.stored(itemID), r.data);
      } else if (r.status === 409 && refusals[r.error.code]) {
        show(r.error.code, refusals[r.error.code]);
      } else if (r.status === 409 && r.error.code === "no_waiting_room") {
        show("no_waiting_room", "This item has no waiting room any more.", "Buy it directly with the Buy button.");
        load();
      } else if (r.status === 429) {
        const wait = parseInt(r.headers.get("Retry-After") || "1", 10);
        show("rate_limited", "Too many tries.", "Please wait " + wait + (wait === 1 ? " second" : " seconds") + " before trying again.");
      } else if (r.status === 401) {
        show("unauthorized", "Your user token was refused.", "Check the token and try again.");
      } else if (r.status === 403 || r.error.code === "pow_unavailable") {
        show(r.error.code, "The queue did not let you in.", "The check your browser solves for the queue failed (" + r.error.message + "). Please try again.");
      } else if (r.status === 0 || r.status === 503) {
        show("unavailable", "The queue is busy right now.", "You have not joined yet. Please try again in a moment.");
      } else {
        show(r.error.code, "You could not join the queue.", r.error.message);
      }
    } finally {
      button.disabled = false;
    }
  }

  // --- buying --------------------------------------------------------------

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

  async function buy() {
    const button = $("buy");
    button.disabled = true;
    show("sending", "Sending your order…");
    try {
      const opts = tokenMode
        ? { token: auth(), body: {} }
        : { body: { user_id: $("user-id").value.trim() } };
      // With a waiting room the order carries the admitted ticket's pass.
      if (status && status.state === "admitted" && status.pass) opts.headers = { "Seckill-Pass": status.pass };
      const r = await api("POST", "/api/v1/items/" + encodeURIComponent(itemID) + "/orders", opts);
      if (r.status === 201) {
        show("created", "It's yours!", ...orderLines(r.data));
      } else if (r.status === 202) {
        show("queued", "Queued: your order is in line.", "Order " + r.data.id + " was accepted and is being recorded; this page checks it for you.");
        await follow(r.data);
      } else if (r.status === 409 && refusals[r.error.code]) {
        show(r.error.code, refusals[r.error.code]);
      } else if (r.status === 403 && passRefusals[r.error.code]) {
        show(r.error.code, ...passRefusals[r.error.code]);
        if (poller) poller.now(); // the ticket's state, or a fresh pass
        else load(); // a room this page did not know of yet
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

  $("buy-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    // A roomed item's one button is Join the queue, then Buy in turn.
    const roomed = item && item.waiting_room;
    if (roomed && !ticket) join();
    else if (!roomed || (status && status.state === "admitted")) buy();
    // else: not its turn yet (Enter in the field); the Buy button is hidden.
  });
  load();
  setInterval(tick, 1000);
  // Every open page reads the item; every 5 seconds, and not while hidden,
  // keeps a crowd of waiting buyers from costing much.
  setInterval(() => { if (!document.hidden) load(); }, 5000);
})();
