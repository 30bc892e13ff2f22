package faulttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// seckillBin is the binary under test, built once by TestMain.
var seckillBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "seckill-faulttest-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "faulttest: temp dir: %v\n", err)
		os.Exit(1)
	}
	seckillBin, err = buildSeckill(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "faulttest: build ./cmd/seckill: %v\n", err)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// buildSeckill builds ./cmd/seckill of this module into dir, with -race
// when the tests themselves run with it, so the service's races under
// faults are reported too.
func buildSeckill(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside a Go module (go env GOMOD = %q)", gomod)
	}
	bin := filepath.Join(dir, "seckill")
	// faultinject: SECKILL_TEST_CRASH_AFTER_COMMIT exists only in such a build.
	args := []string{"build", "-tags", "faultinject", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/seckill")...)
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	return bin, nil
}
