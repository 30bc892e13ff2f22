package testenv

import "testing"

// FreeClusterBase's ports, bus ports included, stay below the ephemeral
// range, and no port is given twice in a process, to it or to FreePort.
func TestFreeClusterBaseGivesEachPortOnce(t *testing.T) {
	seen := map[int]bool{}
	give := func(what string, port int) {
		t.Helper()
		if port < portsLow || port >= portsHigh {
			t.Errorf("%s: port %d outside [%d, %d)", what, port, portsLow, portsHigh)
		}
		if seen[port] {
			t.Errorf("%s: port %d given twice", what, port)
		}
		seen[port] = true
	}
	for range 50 {
		base := FreeClusterBase(t, 3)
		for p := base + 1; p <= base+3; p++ {
			give("cluster node", p)
			give("cluster bus", p+10000)
		}
		give("FreePort", FreePort(t))
	}
}
