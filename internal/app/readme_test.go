package app

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsEverySetting keeps the README's configuration table in
// step with settings(): every variable the service reads is listed once,
// with its flag and the default defined in defaults.go, and the table
// lists nothing the service does not read.
func TestReadmeListsEverySetting(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `SECKILL_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		env := strings.Trim(cells[0], "`")
		if _, dup := rows[env]; dup {
			t.Errorf("README lists %s twice", env)
		}
		rows[env] = cells
	}
	var c Config
	for _, s := range c.settings() {
		cells, ok := rows[s.env]
		if !ok {
			t.Errorf("README's configuration table lacks %s", s.env)
			continue
		}
		delete(rows, s.env)
		if len(cells) != 4 {
			t.Errorf("README row of %s: got %d cells, want 4 (variable, flag, meaning, default)", s.env, len(cells))
			continue
		}
		if want := "`-" + s.flag + "`"; cells[1] != want {
			t.Errorf("README row of %s: flag got %s, want %s", s.env, cells[1], want)
		}
		if want := s.documented(); cells[3] != want {
			t.Errorf("README row of %s: default got %q, want %q", s.env, cells[3], want)
		}
	}
	for env := range rows {
		t.Errorf("README lists %s, which the service does not read", env)
	}
}

// TestNoCrashInjectionInProduction: the production build has no
// fault-injection setting, whatever the environment says.
func TestNoCrashInjectionInProduction(t *testing.T) {
	t.Parallel()
	if FaultInjection {
		t.Skip("built with -tags faultinject")
	}
	if hook := crashAfterCommit(func(string) string { return "1" }); hook != nil {
		t.Error("crashAfterCommit: got a hook in a build without the faultinject tag")
	}
	var c Config
	for _, s := range c.settings() {
		if strings.Contains(s.env, "CRASH") {
			t.Errorf("setting %s is a fault-injection point in the production build", s.env)
		}
	}
}
