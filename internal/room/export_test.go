package room

import "time"

// MarkAt is a mark at t, for tests that need one without a Redis to read
// it from, or one of a given age.
func MarkAt(t time.Time) Mark { return Mark{t} }

// SpentKeyOf names r's sorted set of spent passes.
func SpentKeyOf(r *Room) string { return r.k.spent }

// MetaKeyOf names r's hash (phase, counters, seen_since, ...).
func MetaKeyOf(r *Room) string { return r.k.meta }
