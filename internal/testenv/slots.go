package testenv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// KeySlot is the Redis Cluster hash slot of key, as CLUSTER KEYSLOT
// computes it: CRC16 (XMODEM) of the key's hash tag, the part between the
// first '{' and the first '}' after it when that is not empty, else of the
// whole key; modulo 16384.
func KeySlot(key string) int {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if n := strings.IndexByte(key[open+1:], '}'); n > 0 {
			key = key[open+1 : open+1+n]
		}
	}
	return int(crc16(key)) % 16384
}

// crc16 is CRC-16/XMODEM: polynomial 0x1021, initial value 0, no
// reflection, no final XOR.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// SlotCheck is a go-redis hook that checks every command a client sends
// touches keys of one Redis Cluster slot: a script's declared KEYS, a
// multi-key command's keys, and all the keys of a MULTI/EXEC transaction
// (which a Cluster runs on one slot). On a single Redis nothing would
// refuse them; on a Cluster each is a CROSSSLOT error. Add it with
// AddHook, run the code under test, then read Violations.
type SlotCheck struct {
	mu         sync.Mutex
	violations []string
	scripts    int
}

var _ redis.Hook = (*SlotCheck)(nil)

// Violations are the commands (or transactions) seen whose keys span
// slots, each with its keys' slots.
func (s *SlotCheck) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Scripts is how many script calls (EVAL, EVALSHA, FCALL) were checked.
func (s *SlotCheck) Scripts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scripts
}

func (s *SlotCheck) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *SlotCheck) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.check([]redis.Cmder{cmd})
		return next(ctx, cmd)
	}
}

func (s *SlotCheck) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() == "multi" {
			s.check(cmds) // one transaction: one slot for all
		} else {
			for _, c := range cmds {
				s.check([]redis.Cmder{c})
			}
		}
		return next(ctx, cmds)
	}
}

// check records cmds when their keys, together, span slots.
func (s *SlotCheck) check(cmds []redis.Cmder) {
	var keys []string
	scripts := 0
	for _, c := range cmds {
		k, script := commandKeys(c.Args())
		keys = append(keys, k...)
		if script {
			scripts++
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scripts += scripts
	if len(keys) < 2 {
		return
	}
	first := KeySlot(keys[0])
	for _, k := range keys[1:] {
		if KeySlot(k) != first {
			var desc []string
			for _, k := range keys {
				desc = append(desc, fmt.Sprintf("%s (slot %d)", k, KeySlot(k)))
			}
			names := make([]string, len(cmds))
			for i, c := range cmds {
				names[i] = c.Name()
			}
			s.violations = append(s.violations, strings.Join(names, "+")+": "+strings.Join(desc, ", "))
			return
		}
	}
}

// commandKeys are the keys among a command's arguments; script reports a
// script call. Commands that take several keys are listed; any other
// command's key is its first argument (a transaction's keys are checked
// together, so single-key commands count too).
func commandKeys(args []any) (keys []string, script bool) {
	if len(args) == 0 {
		return nil, false
	}
	str := func(i int) string {
		if i >= len(args) {
			return ""
		}
		return fmt.Sprint(args[i])
	}
	name := strings.ToLower(str(0))
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		n, _ := strconv.Atoi(str(2))
		for i := 3; i < 3+n && i < len(args); i++ {
			keys = append(keys, str(i))
		}
		return keys, true
	case "del", "unlink", "exists", "mget", "touch", "watch", "sunion", "sinter", "sdiff", "sunionstore",
		"sinterstore", "sdiffstore", "pfcount", "pfmerge", "blpop", "brpop", "zunionstore", "zinterstore":
		for i := 1; i < len(args); i++ {
			keys = append(keys, str(i))
		}
		return keys, false
	case "mset", "msetnx":
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, str(i))
		}
		return keys, false
	case "rename", "renamenx", "smove", "rpoplpush", "lmove", "copy", "blmove":
		return []string{str(1), str(2)}, false
	case "xread", "xreadgroup":
		for i := 1; i < len(args); i++ {
			if strings.EqualFold(str(i), "streams") {
				rest := args[i+1:]
				for j := 0; j < len(rest)/2; j++ {
					keys = append(keys, fmt.Sprint(rest[j]))
				}
				break
			}
		}
		return keys, false
	case "xinfo", "xgroup", "object", "memory":
		return []string{str(2)}, false // XINFO STREAM key, XGROUP CREATE key ...
	case "multi", "exec", "discard", "ping", "publish", "subscribe", "unsubscribe", "script", "info", "config",
		"cluster", "client", "hello", "select", "scan", "keys", "time", "dbsize", "command":
		return nil, false
	}
	// Any other command's first argument is its one key.
	if len(args) > 1 {
		return []string{str(1)}, false
	}
	return nil, false
}
