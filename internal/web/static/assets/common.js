// Helpers shared by the console and the sale page. Data from the API is only
// ever written with textContent or as an attribute value, never as HTML.
"use strict";

const seckill = (() => {
  const SVG = "http://www.w3.org/2000/svg";

  // el builds an element: attrs are attributes (false/null skipped), the
  // children are nodes or text.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  // svg builds an SVG element; text, when given, is its textContent.
  function svg(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    setAttrs(e, attrs);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function setAttrs(e, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === false || v === null || v === undefined) continue;
      e.setAttribute(k, v === true ? "" : String(v));
    }
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function text(id, value) {
    document.getElementById(id).textContent = value === null || value === undefined ? "–" : String(value);
  }

  // api calls the service and returns {status, headers, data, error}; error
  // is the answer's {code, message} for a status of 400 or more. A network
  // failure is status 0.
  async function api(method, path, opts) {
    const o = opts || {};
    const headers = Object.assign({ Accept: "application/json" }, o.headers || {});
    if (o.token) headers.Authorization = "Bearer " + o.token;
    const init = { method, headers, cache: "no-store", credentials: "omit", signal: o.signal };
    if (o.body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(o.body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (err) {
      if (err.name === "AbortError") throw err;
      return { status: 0, headers: new Headers(), data: null,
        error: { code: "network", message: "The service could not be reached." } };
    }
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    const out = { status: res.status, headers: res.headers, data, error: null };
    if (res.status >= 400) {
      out.error = (data && data.error) || { code: "http_" + res.status, message: res.statusText || "request failed" };
    }
    return out;
  }

  const moneyFmt = new Intl.NumberFormat(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  function money(cents) {
    return moneyFmt.format(cents / 100);
  }

  function when(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
  }

  // span is a duration in words: "2d 3h", "1h 02m 03s", "45s".
  function span(ms) {
    let s = Math.max(0, Math.floor(ms / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    const two = (n) => String(n).padStart(2, "0");
    if (d > 0) return d + "d " + h + "h " + two(m) + "m";
    if (h > 0) return h + "h " + two(m) + "m " + two(s) + "s";
    if (m > 0) return m + "m " + two(s) + "s";
    return s + "s";
  }

  return { el, svg, clear, text, api, money, when, span };
})();
