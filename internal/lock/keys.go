package lock

import "strings"

// keys are the Redis keys and channel of one lock. They all carry the same hash
// tag so that every script touches a single Redis Cluster slot.
type keys struct {
	lock     string // hash: owner token, first fence, one field per acquisition
	fence    string // INCR counter; persistent so fences never go back
	released string // who last released which fences; makes a retried release report correctly
	queue    string // fair mode: waiting attempt ids, FIFO
	deadline string // fair mode: attempt id -> ms after which the waiter counts as gone
	channel  string // PUBLISHed on release to wake waiters
}

func keysFor(key string) keys {
	base := hashTagged(key)
	return keys{
		lock:     base,
		fence:    base + ":fence",
		released: base + ":released",
		queue:    base + ":queue",
		deadline: base + ":waiters",
		channel:  base + ":wake",
	}
}

// hashTagged returns key unchanged when it already has a Redis Cluster hash tag
// (a non-empty "{...}" after the first '{'), else wraps it as "{key}".
func hashTagged(key string) string {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if length := strings.IndexByte(key[open+1:], '}'); length > 0 {
			return key
		}
	}
	return "{" + key + "}"
}
