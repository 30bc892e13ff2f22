package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a private Redis Cluster of the test's own: redis-server
// nodes on free loopback ports with their files in temp dirs, which a test
// may stop, kill and restart at will. They are killed when the test ends.
type RedisCluster struct {
	t testing.TB
	// Nodes are the servers in the order given to `redis-cli --cluster
	// create`: the masters first, then the replicas. Kill and Start one
	// to take it down and bring it back (it rejoins with its nodes.conf,
	// its data gone: nothing is persisted).
	Nodes []*RedisServer
}

// StartCluster starts a private Redis Cluster of masters masters, each with
// replicasPerMaster replicas (so masters*(1+replicasPerMaster) nodes), and
// waits until every node says cluster_state:ok. extra is passed to every
// node's redis-server. Without redis-server and redis-cli the test skips,
// or fails under CI=true.
func StartCluster(t testing.TB, masters, replicasPerMaster int, extra ...string) *RedisCluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("StartCluster: %d masters; Redis Cluster needs at least 3", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		if InCI() {
			t.Fatalf("CI=true but redis-cli is not installed: %v", err)
		}
		t.Skipf("redis-cli not installed: %v", err)
	}
	c := &RedisCluster{t: t}
	n := masters * (1 + replicasPerMaster)
	addrs := make([]string, 0, n)
	for range n {
		// The cluster bus gets a port of its own: the default, port+10000,
		// may lie past 65535 for a port the kernel hands out.
		args := append([]string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000", "--cluster-port", strconv.Itoa(FreePort(t)),
			"--appendonly", "no", "--repl-diskless-sync-delay", "0"}, extra...)
		s := StartRedisServer(t, args...)
		c.Nodes = append(c.Nodes, s)
		addrs = append(addrs, s.Addr())
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	c.AwaitOK(15 * time.Second)
	if replicasPerMaster > 0 {
		// A replica that never synced cannot be promoted: a test that
		// kills a master right away would see no failover.
		c.AwaitReplicasSynced(15 * time.Second)
	}
	return c
}

// AwaitReplicasSynced waits until every running replica's link to its
// master is up (INFO replication: master_link_status:up), and fails the
// test after d.
func (c *RedisCluster) AwaitReplicasSynced(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, s := range c.Nodes {
		if !s.Running() {
			continue
		}
		for {
			info := s.info("replication")
			if strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up") {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("replica %s not synced after %s: %s", s.Addr(), d, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// ReplicaOf is a running replica of the master at addr, or nil.
func (c *RedisCluster) ReplicaOf(addr string) *RedisServer {
	for _, s := range c.Nodes {
		if s.Running() && s.Role() == "slave" && "127.0.0.1:"+infoField(s.info("replication"), "master_port") == addr {
			return s
		}
	}
	return nil
}

// Role is the server's replication role: "master", "slave", or the error
// reading it.
func (s *RedisServer) Role() string {
	info := s.info("replication")
	if r := infoField(info, "role"); r != "" {
		return r
	}
	return info
}

// infoField is one field of an INFO reply, "" when it has none.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// info is the node's INFO section, or the error reading it.
func (s *RedisServer) info(section string) string {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, section).Result()
	if err != nil {
		return err.Error()
	}
	return info
}

// URL is the cluster's go-redis cluster URL, naming every node:
// redis://host:port?addr=host:port&addr=...
func (c *RedisCluster) URL() string {
	var b strings.Builder
	b.WriteString("redis://" + c.Nodes[0].Addr())
	for i, s := range c.Nodes[1:] {
		b.WriteString(map[bool]string{true: "?", false: "&"}[i == 0])
		b.WriteString("addr=" + s.Addr())
	}
	return b.String()
}

// AwaitOK waits until every running node says cluster_state:ok, and fails
// the test after d.
func (c *RedisCluster) AwaitOK(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		bad := ""
		for _, s := range c.Nodes {
			if !s.Running() {
				continue
			}
			if st := s.clusterState(); st != "ok" {
				bad = s.Addr() + " cluster_state:" + st
				break
			}
		}
		if bad == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("private redis cluster not ok after %s: %s", d, bad)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// KillAll kills every node at once (SIGKILL): the whole cluster is down and
// its data gone.
func (c *RedisCluster) KillAll() {
	for _, s := range c.Nodes {
		s.Kill()
	}
}

// StartAll starts every node that is down and waits until the cluster is
// whole again: each node rejoins with its nodes.conf (its slots, its
// role), empty.
func (c *RedisCluster) StartAll() {
	c.t.Helper()
	for _, s := range c.Nodes {
		if !s.Running() {
			s.Start()
		}
	}
	c.AwaitOK(30 * time.Second)
}

// clusterState is the node's cluster_state, or the error reading it.
func (s *RedisServer) clusterState() string {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return err.Error()
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "cluster_state:"); ok {
			return v
		}
	}
	return "unknown"
}

// FreePort is a loopback port free at the time of asking, below the
// kernel's ephemeral range (32768-60999 on Linux by default): a port the
// kernel handed out for Listen(":0") and took back may be handed out again
// at once as the source port of some connection, and the redis-server
// meant for it then fails to bind (seen in CI, where many tests connect at
// once). A port below that range is never handed out so; one port is
// given once in a process.
func FreePort(t testing.TB) int {
	t.Helper()
	for range 200 {
		if port := portsLow + rand.IntN(portsHigh-portsLow); claimPort(port) {
			return port
		}
	}
	t.Fatal("no free loopback port below the ephemeral range")
	return 0
}

// FreeClusterBase is a base port for scripts/redis-cluster.sh with n
// nodes: the nodes' ports base+1..base+n and their cluster bus ports
// (+10000, which the script does not let one choose) are all free at the
// time of asking, below the ephemeral range (see FreePort), and given
// once in a process, FreePort's included.
func FreeClusterBase(t testing.TB, n int) int {
	t.Helper()
	const busOffset = 10000
	for range 200 {
		base := portsLow - 1 + rand.IntN(portsHigh-busOffset-n-portsLow)
		var claimed []int
		for p := base + 1; p <= base+n; p++ {
			for _, port := range []int{p, p + busOffset} {
				if claimPort(port) {
					claimed = append(claimed, port)
				}
			}
		}
		if len(claimed) == 2*n {
			return base
		}
		for _, port := range claimed { // free, so another caller may take it
			portsGiven.Delete(port)
		}
	}
	t.Fatalf("no %d free loopback ports (and their bus ports) below the ephemeral range", n)
	return 0
}

// claimPort gives port if no caller in this process was given it and it
// is free now. A port in use stays marked given: it is not tried again.
func claimPort(port int) bool {
	if _, taken := portsGiven.LoadOrStore(port, true); taken {
		return false
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// The ports FreePort and FreeClusterBase pick from, and those they gave.
const portsLow, portsHigh = 21000, 32700

var portsGiven sync.Map // int -> true

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// Running reports whether the server process is up (started and not
// killed).
func (s *RedisServer) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}
