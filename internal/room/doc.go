// Package room is a fair virtual waiting room in front of a sale (issue
// 21): buyers take a ticket, the tickets taken before the opening are put in
// a random order anyone can check afterwards (the draw), later ones queue in
// arrival order, and admission lets them through at a set rate with a signed
// pass that the order path verifies in the process. It is an admission
// concern in front of the shop, not a strategy inside it: it knows nothing
// of stock except what its caller tells it (the cap of live passes, Close
// when sold out).
//
// internal/rooms wires it into the service (storage, the admission loop,
// the HTTP routes); docs/DESIGN.md, "Waiting room", describes both.
//
// The parts:
//
//   - Passes (PassKey, Pass, Line): HMAC-SHA256 over (item, ticket, expiry,
//     line, user), base64url, verified with no Redis call; the line (LineOf
//     the room's commitment) binds a pass to the line it was issued in
//     (VerifyIn). Each refusal has its own sentinel (ErrPassMissing,
//     ErrPassForged, ErrPassExpired, ErrPassWrongUser, ErrPassWrongItem,
//     ErrPassWrongLine), all matching ErrPassRejected.
//   - The draw (Seed, DrawOrder, VerifyDraw, PublicDraw): a commitment
//     published at Setup, the seed revealed at Open, tickets sorted by
//     HMAC-SHA256(seed, decimal ticket id). The seckill-draw command checks
//     a room's public draw.
//   - The room (Room): one item's tickets in Redis, every key in the item's
//     hash tag {item:ID} (beside the item's gate keys), every change one Lua
//     script, so instances share it and a Redis Cluster serves it from the
//     item's slot.
//   - Proof-of-work on joining, optional (IssueChallenge, VerifyPoW,
//     SolvePoW): a stateless challenge signed with the PassKey, bound to
//     the item and the user, good for ChallengeTTL; a nonce whose
//     SHA-256(challenge ":" nonce) has the leading zero bits. Refusals:
//     ErrPoWRequired, and ErrPoWInvalid's children.
//
// A room's life:
//
//	r, _ := room.New(rdb, itemID, &room.Options{PassKey: key})
//	seed := room.NewSeed()                         // keep it secret (and durable)
//	r.Setup(ctx, seed.Commitment(), passTTL)       // publish the commitment
//	st, _ := r.Join(ctx, userID, now)              // a ticket; again: the same one
//	res, _ := r.JoinMany(ctx, userIDs, now)        // the same for many, one script call
//	r.Open(ctx, seed)                              // at starts_at: the draw
//	r.MarkSeen(ctx, now, polled)                   // every tick: the tickets polled or joined
//	m, _ := r.Mark(ctx)                            // every ~100 ms, any instance:
//	r.Admit(ctx, now, m, rate, maxLive)            // maxLive from the stock read after m;
//	                                               // passes over tickets not seen lately,
//	                                               // defers those not seen very lately, and
//	                                               // lets passes unread in ClaimWindow lapse
//	r.HoldAdmission(ctx, until)                    // rebuilt after a loss: old passes live
//	st, _ = r.Status(ctx, ticket, now)             // poll: place, ETA, the pass
//	key.VerifyIn(pass, itemID, line, userID, now) // the order path, no Redis
//	r.Consume(ctx, ticket, now)                    // after the order was taken
//	r.Close(ctx) / r.Resume(ctx)                   // sold out / stock came back
//	r.Stats(ctx)                                   // counters for metrics and the console
//
// A returned unit (a cancel after a sell-out) must reach a live waiter
// within seconds, not after every closed page ahead had a pass for a TTL:
// MarkSeen writes long (SeenWindow, 30 s) and short (ShortSeenWindow, 3 s)
// seen windows; Admit passes over a ticket in neither long window and, in
// a room that sold out and came back (Resume after Close), defers
// one in neither short window (it reads waiting at position 1 and is
// admitted first once seen again), and a pass its page has not read
// (Status) within Options.ClaimWindow lapses and defers its ticket. The
// details are in seen.go and admit.lua.
//
// Status.User names the ticket's owner and Status.Pass is signed for that
// owner: a handler must show a ticket's pass to its owner only (tickets are
// small sequential numbers, and the draw publishes them). A pass shown to
// someone else is useless to them (it is bound to the owner's user id), but
// it leaks who queued.
//
// Failure: every Redis error is ErrUnavailable, wrapping the cause; the
// caller fails closed. A crash between Open's steps leaves a room that the
// next Open call finishes (each step is safe to repeat); a crash in any
// other call leaves the one script's effect or none.
package room
