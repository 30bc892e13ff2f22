// k6 load test for seckill: one fresh item, every iteration a distinct user.
//
//   k6 run -e BASE_URL=http://127.0.0.1:8080 -e ADMIN_TOKEN=$SECKILL_ADMIN_TOKEN \
//          -e STOCK=100 -e ITERATIONS=2000 -e VUS=32 loadtest/k6/seckill.js
//
// Environment (all optional except ADMIN_TOKEN):
//   BASE_URL    service base URL                      (default http://127.0.0.1:8080)
//   ADMIN_TOKEN admin bearer token                    (falls back to SECKILL_ADMIN_TOKEN)
//   STOCK       stock of the item created in setup()  (default 100)
//   STRATEGY    lua | lock | lua-async; empty = server default
//   ITERATIONS  order attempts in total               (default 2000)
//   VUS         virtual users (closed loop)           (default 32)
//   RATE        if set: open loop at RATE attempts/s (constant-arrival-rate), VUS = max in flight
//   MAX_DURATION cap on the scenario                  (default 60s)
//   P99_MS      p99 threshold for the order request   (default 2000)
//
// A 409 sold_out / already_purchased is a normal answer in a flash sale, not
// a failure. Any other status, or a 2xx without an order id, fails a check.
// teardown() reads the item back and aborts the run (non-zero exit) if
// sold > stock or remaining != stock - sold.
import http from 'k6/http';
import { check } from 'k6';
import exec from 'k6/execution';
import { Counter, Rate } from 'k6/metrics';

const BASE_URL = (__ENV.BASE_URL || 'http://127.0.0.1:8080').replace(/\/$/, '');
const ADMIN_TOKEN = __ENV.ADMIN_TOKEN || __ENV.SECKILL_ADMIN_TOKEN || '';
const STOCK = parseInt(__ENV.STOCK || '100', 10);
const STRATEGY = __ENV.STRATEGY || '';
const ITERATIONS = parseInt(__ENV.ITERATIONS || '2000', 10);
const VUS = parseInt(__ENV.VUS || '32', 10);
const RATE = parseInt(__ENV.RATE || '0', 10);
const MAX_DURATION = __ENV.MAX_DURATION || '60s';
const P99_MS = parseInt(__ENV.P99_MS || '2000', 10);

const created = new Counter('orders_created');
const soldOut = new Counter('orders_sold_out');
const already = new Counter('orders_already_purchased');
const unexpected = new Rate('orders_unexpected');

const scenario = RATE > 0
  ? {
      executor: 'constant-arrival-rate',
      rate: RATE,
      timeUnit: '1s',
      duration: `${Math.max(1, Math.ceil(ITERATIONS / RATE))}s`,
      preAllocatedVUs: VUS,
      maxVUs: VUS,
    }
  : {
      executor: 'shared-iterations',
      vus: VUS,
      iterations: ITERATIONS,
      maxDuration: MAX_DURATION,
    };

export const options = {
  scenarios: { flash_sale: scenario },
  thresholds: {
    checks: ['rate==1'],
    orders_unexpected: ['rate==0'],
    'http_req_failed{name:order}': ['rate==0'],
    'http_req_duration{name:order}': [`p(99)<${P99_MS}`],
  },
  summaryTrendStats: ['avg', 'min', 'med', 'p(90)', 'p(99)', 'max'],
};

// 409 is an expected answer, so it does not count in http_req_failed.
http.setResponseCallback(http.expectedStatuses(200, 201, 202, 409));

function adminHeaders() {
  return { headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${ADMIN_TOKEN}` } };
}

export function setup() {
  if (!ADMIN_TOKEN) {
    exec.test.abort('ADMIN_TOKEN (or SECKILL_ADMIN_TOKEN) is required');
  }
  const run = `${Date.now().toString(36)}${Math.floor(Math.random() * 1e6).toString(36)}`;
  const body = { name: `k6-${run}`, stock: STOCK, price_cents: 100 };
  if (STRATEGY) body.strategy = STRATEGY;
  const res = http.post(`${BASE_URL}/api/v1/admin/items`, JSON.stringify(body),
    Object.assign(adminHeaders(), { tags: { name: 'admin' } }));
  if (res.status !== 201) {
    exec.test.abort(`create item: HTTP ${res.status} ${res.body}`);
  }
  const item = res.json();
  console.log(`k6: item ${item.id} stock ${item.stock} strategy ${item.strategy}, run ${run}`);
  return { itemId: item.id, run };
}

export default function (data) {
  const n = exec.scenario.iterationInTest; // unique across VUs
  const user = `k6-${data.run}-u${n}`;
  const res = http.post(`${BASE_URL}/api/v1/items/${data.itemId}/orders`, JSON.stringify({ user_id: user }), {
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': `k6-${data.run}-k${n}` },
    tags: { name: 'order' },
  });
  let code = '';
  if (res.status === 409) {
    try { code = res.json('error.code'); } catch (e) { code = ''; }
  }
  const ok2xx = (res.status === 201 || res.status === 202) && (() => {
    try { return !!res.json('id'); } catch (e) { return false; }
  })();
  const expected409 = res.status === 409 && (code === 'sold_out' || code === 'already_purchased');
  check(res, {
    'order: 201/202 with id, or 409 sold_out/already_purchased': () => ok2xx || expected409,
  });
  unexpected.add(!(ok2xx || expected409));
  if (ok2xx) created.add(1);
  else if (code === 'sold_out') soldOut.add(1);
  else if (code === 'already_purchased') already.add(1);
}

export function teardown(data) {
  const res = http.get(`${BASE_URL}/api/v1/admin/items/${data.itemId}`, Object.assign(adminHeaders(), { tags: { name: 'admin' } }));
  if (res.status !== 200) {
    exec.test.abort(`read item: HTTP ${res.status} ${res.body}`);
  }
  const it = res.json();
  console.log(`k6: item ${it.id} stock ${it.stock} sold ${it.sold} remaining ${it.remaining}`);
  if (it.sold > it.stock) {
    exec.test.abort(`OVERSOLD: sold ${it.sold} > stock ${it.stock}`);
  }
  if (it.remaining !== it.stock - it.sold) {
    exec.test.abort(`remaining ${it.remaining} != stock ${it.stock} - sold ${it.sold}`);
  }
}
