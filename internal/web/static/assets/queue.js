// The waiting room's client, used by the sale page (issue 21; the routes are
// in docs/API.md): join an item's queue, solving the proof of work when the
// service asks for one; keep the ticket in the tab's session storage, so a
// reload keeps the place; and follow the ticket's status.
//
// The polling backoff (the load harness's room mode copies it; see
// docs/DESIGN.md, "Waiting room"):
//   - after a 200, poll again poll_after_ms later, as the service advises
//     (1000 while waiting, 2000 far back in line, 5000 long before the
//     opening or while held: sold out, but a unit may come back). 0 means the state is final (used, expired, sold_out, ended): stop.
//     A missing or malformed poll_after_ms counts as 1000;
//   - after a 429, wait Retry-After seconds (1 when absent);
//   - after a 503, another 5xx or a network failure, wait 1 s, then 2, 4,
//     8, and 8 from then on, each times a random 1 to 1.5 (so a crowd that
//     failed together does not come back together); the next 200 returns
//     to the service's advice;
//   - a 404 (no such ticket, or the room is gone) stops and forgets it;
//   - the page may ask for a poll at once (now()), when a pass it shows has
//     just expired.
// Polling goes on while the tab is hidden: a pass is issued to whoever
// waits, and a browser slows a hidden tab's timers to once a second anyway.
"use strict";

const seckillQueue = (() => {
  const { api } = seckill;
  const key = (itemID) => "seckill.ticket." + itemID;
  const base = (itemID) => "/api/v1/items/" + encodeURIComponent(itemID) + "/queue";

  // stored is the ticket this tab holds for the item: {ticket, user}, or null.
  function stored(itemID) {
    try {
      const v = JSON.parse(sessionStorage.getItem(key(itemID)));
      return v && typeof v.ticket === "string" ? v : null;
    } catch (_) {
      return null;
    }
  }

  function forget(itemID) {
    sessionStorage.removeItem(key(itemID));
  }

  // solver loads the proof-of-work solver (assets/pow.js) the first time it
  // is needed: most sales never ask for it. null when it cannot be loaded.
  let solverLoad = null;
  function solver() {
    if (window.seckillPoW) return Promise.resolve(window.seckillPoW);
    if (!solverLoad) {
      solverLoad = new Promise((done) => {
        const s = document.createElement("script");
        s.src = "/assets/pow.js";
        s.addEventListener("load", () => done(window.seckillPoW || null));
        s.addEventListener("error", () => { solverLoad = null; done(null); });
        document.head.append(s);
      });
    }
    return solverLoad;
  }

  // join takes a place in the item's queue for user (in token mode the
  // token's user) and keeps the ticket. It answers as api() does; on 200,
  // data is the ticket's status. on.solving() is called when the service
  // asks for a proof of work, before the page's script solves it.
  async function join(itemID, user, token, on) {
    const body = token ? {} : { user_id: user };
    let r = await api("POST", base(itemID), { token, body });
    if (r.status === 403 && r.error.code === "pow_required") {
      if (on && on.solving) on.solving();
      const q = token ? "" : "?user_id=" + encodeURIComponent(user);
      const ch = await api("GET", base(itemID) + "/challenge" + q, { token });
      if (ch.status !== 200) return ch;
      const pow = await solver();
      if (!pow) {
        return { status: 0, headers: new Headers(), data: null,
          error: { code: "pow_unavailable", message: "The puzzle solver could not be loaded." } };
      }
      const nonce = await pow.solve(ch.data.challenge, ch.data.bits);
      r = await api("POST", base(itemID), { token, body: Object.assign({}, body, { pow: { challenge: ch.data.challenge, nonce: String(nonce) } }) });
    }
    if (r.status === 200 && r.data && typeof r.data.ticket === "string") {
      sessionStorage.setItem(key(itemID), JSON.stringify({ ticket: r.data.ticket, user: token ? "" : user }));
    }
    return r;
  }

  // follow polls the ticket's status with the backoff above until it is
  // final or stop() is called; first, when given, is a status just read
  // (the join's answer), taken as the first poll's. token() is the user's
  // token, if any. on: {status(st), problem(r, waitMs), lost()}.
  function follow(itemID, ticket, token, on, first) {
    let stopped = false;
    let wake = null; // resolves the current wait early
    const path = base(itemID) + "/" + encodeURIComponent(ticket);
    (async () => {
      let failures = 0;
      let r = first ? { status: 200, data: first } : null;
      while (!stopped) {
        if (!r) r = await api("GET", path, { token: token() });
        if (stopped) return;
        let wait;
        if (r.status === 200) {
          failures = 0;
          on.status(r.data);
          const after = r.data.poll_after_ms;
          if (after === 0) return; // final
          wait = Number.isInteger(after) && after > 0 ? after : 1000;
        } else if (r.status === 404) {
          forget(itemID);
          on.lost();
          return;
        } else if (r.status === 429) {
          const s = parseInt(r.headers.get("Retry-After") || "1", 10);
          wait = 1000 * (Number.isInteger(s) && s > 0 ? s : 1);
          on.problem(r, wait);
        } else {
          failures++;
          wait = Math.round(Math.min(8000, 1000 * 2 ** (failures - 1)) * (1 + Math.random() / 2));
          on.problem(r, wait);
        }
        r = null;
        await new Promise((ok) => { wake = ok; setTimeout(ok, wait); });
        wake = null;
      }
    })();
    return {
      stop() { stopped = true; if (wake) wake(); },
      now() { if (wake) wake(); },
    };
  }

  return { stored, forget, join, follow };
})();
