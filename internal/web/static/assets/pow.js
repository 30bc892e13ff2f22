// The proof-of-work of joining a waiting room (issue 21), standalone: no
// other script needed. The server hands out a challenge and a number of
// bits; the page finds a nonce, a decimal string, such that
// SHA-256(challenge + ":" + nonce) starts with at least that many zero bits,
// and joins with both (internal/room/pow.go checks it).
//
//   seckillPoW.solve(challenge, bits, {signal, onProgress, worker}) -> Promise<nonce>
//
// The hashing runs in a Web Worker (this same file, loaded as the worker's
// script), so the page stays responsive; where a worker cannot start, it
// runs on the page in batches that yield to the event loop between them.
// signal (an AbortSignal) stops it (the promise rejects with an AbortError);
// onProgress(tried) is told how many nonces were tried so far; worker: false
// keeps it on the page. crypto.subtle exists only on a secure page (https,
// or http on localhost): elsewhere solve rejects and says so.
"use strict";

(() => {
  const BATCH = 512; // digests started together, then checked
  const MAX_BITS = 32;

  // zeroBits is the number of leading zero bits of a digest (at most 32).
  function zeroBits(digest) {
    const x = new DataView(digest).getUint32(0);
    return x === 0 ? 32 : Math.clz32(x);
  }

  // nextTask resolves on a later task, letting the page handle input and
  // paint (a message, not setTimeout, which browsers slow down to 4 ms).
  function nextTask() {
    return new Promise((resolve) => {
      const ch = new MessageChannel();
      ch.port1.onmessage = () => resolve();
      ch.port2.postMessage(null);
    });
  }

  // search tries the nonces 0, 1, 2… in batches. stopped() is asked between
  // batches; true ends the search with null.
  async function search(challenge, bits, stopped, progress, yieldEachBatch) {
    const enc = new TextEncoder();
    const prefix = challenge + ":";
    let tried = 0;
    for (let n = 0; n + BATCH <= Number.MAX_SAFE_INTEGER; ) {
      const nonces = new Array(BATCH);
      const digests = new Array(BATCH);
      for (let i = 0; i < BATCH; i++, n++) {
        nonces[i] = String(n);
        digests[i] = crypto.subtle.digest("SHA-256", enc.encode(prefix + nonces[i]));
      }
      const sums = await Promise.all(digests);
      for (let i = 0; i < BATCH; i++) {
        if (zeroBits(sums[i]) >= bits) return nonces[i];
      }
      tried += BATCH;
      progress(tried);
      if (yieldEachBatch) await nextTask();
      if (stopped()) return null;
    }
    throw new Error("proof-of-work: no nonce found");
  }

  // In a worker: one message {challenge, bits} starts a search; it answers
  // {tried} as it goes, then {nonce} or {error}.
  if (typeof document === "undefined" && typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
    self.onmessage = async (e) => {
      const { challenge, bits } = e.data || {};
      try {
        if (!self.crypto || !self.crypto.subtle) throw new Error("proof-of-work: crypto.subtle is missing in the worker");
        const nonce = await search(String(challenge), Number(bits), () => false, (tried) => self.postMessage({ tried }), false);
        self.postMessage({ nonce });
      } catch (err) {
        self.postMessage({ error: String((err && err.message) || err) });
      }
    };
    return;
  }

  // On a page.
  const scriptURL = document.currentScript ? document.currentScript.src : "";
  let lastMode = "";

  function abortError() {
    return new DOMException("proof-of-work aborted", "AbortError");
  }

  // inWorker runs the search in a worker. It resolves a nonce, or null when
  // the worker could not start (the caller then searches on the page).
  function inWorker(challenge, bits, signal, progress) {
    return new Promise((resolve, reject) => {
      let w;
      try {
        w = new Worker(scriptURL);
      } catch (_) {
        resolve(null);
        return;
      }
      let started = false;
      const done = () => {
        w.terminate();
        if (signal) signal.removeEventListener("abort", onAbort);
      };
      const onAbort = () => {
        done();
        reject(abortError());
      };
      if (signal) signal.addEventListener("abort", onAbort);
      w.onmessage = (e) => {
        started = true;
        const m = e.data || {};
        if (typeof m.tried === "number") {
          progress(m.tried);
        } else if (typeof m.nonce === "string") {
          done();
          resolve(m.nonce);
        } else {
          done();
          reject(new Error(m.error || "proof-of-work: the worker failed"));
        }
      };
      w.onerror = (e) => {
        e.preventDefault();
        done();
        if (started) reject(new Error("proof-of-work: the worker failed: " + e.message));
        else resolve(null); // never ran (blocked, or no workers here)
      };
      w.postMessage({ challenge, bits });
    });
  }

  async function solve(challenge, bits, opts) {
    const o = opts || {};
    if (typeof challenge !== "string" || challenge === "") throw new TypeError("proof-of-work: challenge must be a non-empty string");
    if (!Number.isInteger(bits) || bits < 0 || bits > MAX_BITS) throw new RangeError("proof-of-work: bits must be an integer from 0 to " + MAX_BITS);
    if (!globalThis.crypto || !crypto.subtle) {
      throw new Error("proof-of-work needs a secure page (https, or http on localhost): this browser hides crypto.subtle here");
    }
    const signal = o.signal;
    if (signal && signal.aborted) throw abortError();
    const progress = typeof o.onProgress === "function" ? o.onProgress : () => {};
    if (o.worker !== false && typeof Worker === "function" && scriptURL) {
      const nonce = await inWorker(challenge, bits, signal, progress);
      if (nonce !== null) {
        lastMode = "worker";
        return nonce;
      }
    }
    const nonce = await search(challenge, bits, () => Boolean(signal && signal.aborted), progress, true);
    if (nonce === null) throw abortError();
    lastMode = "page";
    return nonce;
  }

  // lastMode says where the last solution was found: "worker" or "page".
  window.seckillPoW = Object.freeze({
    solve,
    get lastMode() {
      return lastMode;
    },
  });
})();
