// Package lock is a Redis lock for one resource at a time, e.g. one hot
// item in a flash sale.
//
// Obtain sets the lock with one Lua script (the equivalent of SET NX PX plus a
// fencing counter), under a random 128-bit owner token:
//
//	l, err := client.Obtain(ctx, "seckill:{item:42}:lock", 5*time.Second, &lock.Options{Wait: 3 * time.Second})
//	if errors.Is(err, lock.ErrNotObtained) { ... busy ... }
//	defer l.Release(ctx)
//	// guard the write with the fence: UPDATE ... WHERE lock_fence < ? -- l.Fence()
//
// Why it is built this way (each point closes a hole of the tutorials this
// project started from):
//
//   - Setting the value and the TTL happen in one script, so there is never
//     a lock without a TTL, and nobody "takes over" a lock by reading its TTL.
//     A lock found without a TTL (set by some other client in two steps) is
//     given one by the next contender's script, so it expires once and one
//     contender gets it; it is never taken over on the spot.
//   - TTLs are time.Duration, at least 1ms, sent as PX milliseconds rounded
//     up; there are no seconds/milliseconds mix-ups and no truncation to 0.
//   - Release, Refresh and TTL check the owner token inside the script, so a
//     holder whose lock expired can never delete or extend a successor's lock.
//     They tell apart "released", ErrExpired and ErrHeldByOther (both match
//     ErrNotHeld). Refresh never brings an expired lock back.
//   - A TTL cannot protect against a holder that pauses (GC, swap) past it.
//     Every acquisition therefore returns a fencing token, Fence(), from an
//     INCR made in the same script: strictly increasing per key. The guarded
//     resource must refuse writes with a fence older than one it has seen.
//   - The fence counter is a Redis key, so Redis losing its data (a restart
//     without persistence, FLUSHALL, eviction) would restart fences at 1,
//     below what the resource has seen. With Options.FenceFloor no lock is
//     granted while the counter is missing: it is first raised, by a script
//     that only ever raises it, to the highest fence the resource reports,
//     so fences stay monotonic across the loss. A holder from before the
//     loss keeps its old fence; the resource refuses it once a newer fence
//     has written, as after any lapsed lease.
//   - A counter that survives but lags the resource (a replica promoted
//     before the last INCRs reached it) looks like any counter, so only the
//     resource can tell: it refuses the holder's fence as stale. The holder
//     then releases, calls Client.RaiseFence with the resource's highest
//     fence (the same only-raise script) and obtains again, getting a fence
//     above it. Raising never lowers the counter, so a holder with an older
//     fence stays refused.
//   - A TTL is only ever extended: a re-entry or a Refresh with a shorter
//     TTL leaves the key's longer TTL alone, so no acquisition's lease is
//     cut short by another acquisition of the same owner.
//   - Lock.Context is cancelled before the lease can lapse (counted on the
//     monotonic clock from when the acquire was sent), or when the lock is
//     found lost; pass it to the work done under the lock.
//   - Scripts are idempotent per attempt: if a reply is lost and go-redis (or
//     the caller) retries, an acquire is recognised as already done (same
//     fence) and a release is reported as released, not expired.
//
// Waiting: with Options.Wait > 0, a waiter sleeps until the PUBLISH that the
// release script sends wakes it. All waiters of a Client share one pub/sub
// connection, and each release wakes one local waiter, not all of them. Timed
// retries remain as a safety net (Options.PollInterval, default 1s, cut to the
// holder's remaining TTL so an expired lock is noticed). With
// Options.NoWakeup, waiters use capped exponential backoff with full jitter.
//
// Optional features: Options.Watchdog refreshes the lock at TTL/3 while it is
// held, up to a total hold cap; an Owner tracks its locks (ReleaseAll) and
// with Options.Reentrant may re-enter them (each acquisition needs its own
// Release, and the key lives as long as the longest lease given); Options.Fair hands the lock over to waiters in arrival order,
// dropping waiters that stopped polling; ClientOptions.Observer receives
// latency, attempt, wait, hold, refresh-failure and lost-lease events.
//
// Redis Cluster: all keys of one lock share a hash tag. A key that has none
// is wrapped as "{key}"; "seckill:{item:42}:lock" is used as is. Besides the
// lock itself, each key keeps two small persistent keys, "<key>:fence" (the
// fence counter, in the lock's slot, so seeding it and granting a lock are
// one slot's scripts) and "<key>:released" (the last release, for idempotent
// retries), plus, in fair mode, a queue that expires when unused.
//
// A Client must be closed (Close) to stop its pub/sub connection.
package lock
