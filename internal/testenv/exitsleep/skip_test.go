package exitsleep_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

func TestMain(m *testing.M) {
	exitsleep.Skip()
	os.Exit(m.Run())
}

// The helper's whole work: print the GORACE it runs with.
func TestHelperPrintsGORACE(t *testing.T) {
	if os.Getenv("EXITSLEEP_HELPER") != "1" {
		t.Skip("a helper of TestSkip")
	}
	gorace, set := os.LookupEnv("GORACE")
	t.Logf("helper pid %d GORACE set=%v %q", os.Getpid(), set, gorace)
}

// Started without GORACE, a -race binary runs its tests with the exit
// sleep off (the race runtime reads GORACE as documented in
// https://go.dev/doc/articles/race_detector#Options); started with a
// GORACE of its developer's, it keeps it.
func TestSkip(t *testing.T) {
	cases := []struct {
		name string
		env  []string // GORACE to start the helper with
		want string
	}{
		{"unset", nil, `GORACE set=true "atexit_sleep_ms=0"`},
		{"set", []string{"GORACE=halt_on_error=1 atexit_sleep_ms=0"}, `GORACE set=true "halt_on_error=1 atexit_sleep_ms=0"`},
	}
	if !raceEnabled {
		cases[0].want = `GORACE set=false ""` // no -race: nothing to skip, Skip does nothing
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPrintsGORACE$", "-test.count=1", "-test.v")
			cmd.Env = append(append(withoutGORACE(os.Environ()), "EXITSLEEP_HELPER=1"), c.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), c.want) {
				t.Errorf("helper printed\n%s\nwant a line with %s", out, c.want)
			}
		})
	}
}

func withoutGORACE(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, "GORACE=") {
			out = append(out, kv)
		}
	}
	return out
}

// Every test package of the module skips the sleep: a package added
// without it would quietly cost the README's test command a second.
func TestEveryTestPackageSkips(t *testing.T) {
	root := filepath.Join("..", "..", "..") // the module's root, from this package
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	skips := map[string]bool{} // directory -> a test file calls Skip
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		skips[dir] = skips[dir] || strings.Contains(string(src), "exitsleep.Skip()")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) < 10 {
		t.Fatalf("found %d test packages under %s: the walk went wrong", len(skips), root)
	}
	for dir, ok := range skips {
		if !ok {
			t.Errorf("%s: no TestMain calls exitsleep.Skip() first (docs/DEVELOPING.md, \"Tests\")", dir)
		}
	}
}
