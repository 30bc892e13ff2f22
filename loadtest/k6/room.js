// k6 load test of a waiting room (issue 21): one fresh item with a room,
// every VU one buyer who joins before the opening, polls its ticket as the
// sale page does (waiting poll_after_ms between polls), and buys with its
// pass once admitted.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=$SECKILL_ADMIN_TOKEN \
//          -e USERS=500 -e STOCK=100 -e RATE=50 loadtest/k6/room.js
//
// Environment (all optional except ADMIN_TOKEN):
//   BASE_URL     service base URL                        (default http://127.0.0.1:8080)
//   ADMIN_TOKEN  admin bearer token                      (falls back to SECKILL_ADMIN_TOKEN)
//   USERS        buyers, one VU each                     (default 500)
//   STOCK        stock of the item                       (default 100)
//   RATE         the room's admit_per_second             (default 50)
//   PASS_TTL     pass_ttl_seconds                        (default 60)
//   OPEN_IN      seconds from setup() to starts_at       (default 5; every VU joins before it)
//   STRATEGY     lua | lock | lua-async; empty = server default
//   MAX_DURATION cap on the scenario                     (default 120s)
//
// A VU is a buyer, not a connection pool: k6 runs a JavaScript runtime per
// VU, so thousands of buyers fit, not a hundred thousand (use the Go
// harness, go run ./loadtest -mode room, for that and for the full
// verification).
//
// Checks: a join answers a ticket; every status is one of the contract's
// states; an admitted status carries a pass; an order with the pass is
// 201/202 (or 409 sold_out if the last units went to others); every buyer
// ends bought or sold_out. teardown() aborts the run (non-zero exit) if
// the item oversold, its counters disagree, it did not sell min(stock,
// buyers), the room's used passes are not the orders, or the opening draw
// does not recompute from the revealed seed (HMAC-SHA256 per ticket, as
// docs/DESIGN.md "The draw" says).
import http from 'k6/http';
import { check, sleep } from 'k6';
import crypto from 'k6/crypto';
import exec from 'k6/execution';
import { Counter, Rate, Trend } from 'k6/metrics';

const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const ADMIN_TOKEN = __ENV.ADMIN_TOKEN || __ENV.SECKILL_ADMIN_TOKEN || '';
const USERS = parseInt(__ENV.USERS || '500', 10);
const STOCK = parseInt(__ENV.STOCK || '100', 10);
const RATE = parseInt(__ENV.RATE || '50', 10);
const PASS_TTL = parseInt(__ENV.PASS_TTL || '60', 10);
const OPEN_IN = parseInt(__ENV.OPEN_IN || '5', 10);
const STRATEGY = __ENV.STRATEGY || '';
const MAX_DURATION = __ENV.MAX_DURATION || '120s';

const bought = new Counter('room_bought');
const soldOut = new Counter('room_sold_out');
const unexpected = new Rate('room_unexpected');
const waitSeconds = new Trend('room_wait_seconds'); // join to reading the pass
const polls = new Counter('room_polls');

export const options = {
  scenarios: {
    room: { executor: 'per-vu-iterations', vus: USERS, iterations: 1, maxDuration: MAX_DURATION },
  },
  thresholds: {
    checks: ['rate==1'],
    room_unexpected: ['rate==0'],
    'http_req_failed{name:poll}': ['rate==0'],
    'http_req_failed{name:join}': ['rate==0'],
  },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(99)', 'max'],
};

// 409 sold_out is an answer, not a failure.
http.setResponseCallback(http.expectedStatuses(200, 201, 202, 409));

const STATES = ['waiting', 'admitted', 'expired', 'used', 'sold_out'];
const FINAL = ['used', 'expired', 'sold_out'];

function adminHeaders() {
  return { headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_TOKEN}` }, tags: { name: 'admin' } };
}

function errorCode(res) {
  try { return res.json('error.code') || ''; } catch (e) { return ''; }
}

export function setup() {
  if (!ADMIN_TOKEN) {
    exec.test.abort('ADMIN_TOKEN (or SECKILL_ADMIN_TOKEN) is required');
  }
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const startsAt = new Date(Math.ceil((Date.now() + OPEN_IN * 1000) / 1000) * 1000);
  const body = {
    name: `k6-room-${run}`, stock: STOCK, price_cents: 100, starts_at: startsAt.toISOString().replace(/\.\d+Z$/, 'Z'),
    waiting_room: { admit_per_second: RATE, pass_ttl_seconds: PASS_TTL, lottery: true },
  };
  if (STRATEGY) body.strategy = STRATEGY;
  const res = http.post(`${BASE_URL}/api/v1/admin/items`, JSON.stringify(body), adminHeaders());
  if (res.status !== 201) {
    exec.test.abort(`create item: HTTP ${res.status} ${res.body}`);
  }
  const item = res.json();
  const view = http.get(`${BASE_URL}/api/v1/items/${item.id}`, { tags: { name: 'item' } });
  const room = view.status === 200 ? view.json('waiting_room') : null;
  if (!room || !room.commitment) {
    exec.test.abort(`item ${item.id}: no waiting_room with a commitment in the public view: ${view.body}`);
  }
  console.log(`k6: item ${item.id} stock ${STOCK} R ${RATE}/s opens ${body.starts_at}, ${USERS} buyers, run ${run}`);
  return { itemId: item.id, run, commitment: room.commitment, startsAt: startsAt.getTime() };
}

export default function (data) {
  const user = `k6-${data.run}-u${exec.vu.idInTest}`;
  const base = `${BASE_URL}/api/v1/items/${data.itemId}`;
  const joinedAt = Date.now();
  let res = http.post(`${base}/queue`, JSON.stringify({ user_id: user }), {
    headers: { 'Content-Type': 'application/json' }, tags: { name: 'join' },
  });
  if (res.status === 409 && errorCode(res) === 'sold_out') {
    soldOut.add(1);
    unexpected.add(false);
    return;
  }
  if (!check(res, { 'join: 200 with a ticket': (r) => r.status === 200 && !!r.json('ticket') })) {
    unexpected.add(true);
    return;
  }
  let st = res.json();
  const ticket = encodeURIComponent(st.ticket);
  let ordered = false;
  let outcome = '';
  for (;;) {
    check(st, { 'status: a known state': (s) => STATES.includes(s.state) });
    if (st.state === 'admitted' && !ordered) {
      check(st, { 'admitted: with a pass': (s) => !!s.pass });
      waitSeconds.add((Date.now() - joinedAt) / 1000);
      ordered = true;
      const o = http.post(`${base}/orders`, JSON.stringify({ user_id: user }), {
        headers: { 'Content-Type': 'application/json', 'Seckill-Pass': st.pass, 'Idempotency-Key': `${user}-k` },
        tags: { name: 'order' },
      });
      const ok = (o.status === 201 || o.status === 202) && !!o.json('id');
      check(o, { 'order with the pass: 201/202, or 409 sold_out': () => ok || (o.status === 409 && errorCode(o) === 'sold_out') });
      if (ok) outcome = 'bought';
    } else if (FINAL.includes(st.state)) {
      break;
    } else {
      sleep(Math.max(st.poll_after_ms || 1000, 100) / 1000);
    }
    res = http.get(`${base}/queue/${ticket}`, { tags: { name: 'poll' } });
    polls.add(1);
    if (res.status !== 200) {
      check(res, { 'poll: 200': () => false });
      unexpected.add(true);
      return;
    }
    st = res.json();
  }
  if (outcome === 'bought') {
    check(st, { 'bought: the ticket reads used': (s) => s.state === 'used' });
    bought.add(1);
  } else {
    check(st, { 'not bought: the ticket reads sold_out': (s) => s.state === 'sold_out' });
    soldOut.add(1);
  }
  unexpected.add(!(outcome === 'bought' ? st.state === 'used' : st.state === 'sold_out'));
}

function hexToBuffer(hex) {
  const b = new Uint8Array(hex.length / 2);
  for (let i = 0; i < b.length; i++) b[i] = parseInt(hex.substr(2 * i, 2), 16);
  return b.buffer;
}

// drawOrder recomputes the opening draw: tickets sorted by
// HMAC-SHA256(key = the seed's raw bytes, message = the ticket in decimal).
function drawOrder(seedHex, preQueue) {
  const key = hexToBuffer(seedHex);
  return preQueue
    .map((t) => ({ t, k: crypto.hmac('sha256', key, String(t), 'hex') }))
    .sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
    .map((x) => x.t);
}

export function teardown(data) {
  const res = http.get(`${BASE_URL}/api/v1/admin/items/${data.itemId}`, adminHeaders());
  if (res.status !== 200) {
    exec.test.abort(`read item: HTTP ${res.status} ${res.body}`);
  }
  const it = res.json();
  const room = it.waiting_room || {};
  console.log(`k6: item ${it.id} stock ${it.stock} sold ${it.sold} remaining ${it.remaining}; room admitted ${room.admitted} used ${room.used} expired ${room.expired} closed ${room.closed}`);
  if (it.sold > it.stock) exec.test.abort(`OVERSOLD: sold ${it.sold} > stock ${it.stock}`);
  if (it.remaining !== it.stock - it.sold) exec.test.abort(`remaining ${it.remaining} != stock ${it.stock} - sold ${it.sold}`);
  if (it.sold !== Math.min(STOCK, USERS)) exec.test.abort(`sold ${it.sold}, want min(stock ${STOCK}, buyers ${USERS})`);
  if (room.used !== it.sold) exec.test.abort(`the room counts ${room.used} passes used, the item sold ${it.sold}`);

  const d = http.get(`${BASE_URL}/api/v1/items/${data.itemId}/draw`, { tags: { name: 'draw' } });
  if (d.status !== 200) exec.test.abort(`draw: HTTP ${d.status} ${d.body}`);
  const draw = d.json();
  if (!draw.seed) exec.test.abort('draw: the seed is not revealed after the opening');
  if (draw.commitment !== data.commitment) exec.test.abort(`draw: commitment ${draw.commitment}, published ${data.commitment}`);
  if (crypto.sha256(hexToBuffer(draw.seed), 'hex') !== draw.commitment) exec.test.abort('draw: the seed does not hash to the commitment');
  const order = drawOrder(draw.seed, draw.pre_queue);
  for (let i = 0; i < draw.served.length; i++) {
    if (draw.served[i] !== order[i]) exec.test.abort(`draw: served #${i + 1} is ticket ${draw.served[i]}, the draw says ${order[i]}`);
  }
  console.log(`k6: draw verified: seed ${draw.seed.slice(0, 8)}…, ${draw.served.length} of ${draw.pre_queue.length} pre-queue tickets served in the drawn order`);
}
