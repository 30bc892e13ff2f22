package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

func TestFitRecoversALine(t *testing.T) {
	xs := []float64{1, 1.0 / 8, 1.0 / 32, 1.0 / 128}
	ys := make([]float64, len(xs))
	for i, x := range xs {
		ys[i] = 630*x + 18.5
	}
	a, b := fit(xs, ys)
	if math.Abs(a-630) > 1e-6 || math.Abs(b-18.5) > 1e-6 {
		t.Errorf("fit: got %.4f per transaction + %.4f per order, want 630 + 18.5", a, b)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("1, 8,500")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 8 || got[2] != 500 {
		t.Errorf("parseSizes(1, 8,500): %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "501", "8,x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// Both paths write every order and count them sold, on real MariaDB, and
// the database dbcost made is gone afterwards.
func TestMeasureWritesEveryOrder(t *testing.T) {
	b := testenv.Real(t)
	pid, err := mariadbPID()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI runs MariaDB on this machine: %v", err)
		}
		t.Skipf("MariaDB is not on this machine: %v", err)
	}
	ctx := context.Background()
	st, drop, err := openStore(ctx, b.MySQLDSN, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer drop()
	for _, path := range []string{"sync", "queued"} {
		perOrder, rate, err := measure(ctx, st, pid, path, 8, 60)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if perOrder < 0 || rate <= 0 {
			t.Errorf("%s: %.1f µs per order at %.0f orders/s", path, perOrder, rate)
		}
	}
	drop()
	db, err := sql.Open("mysql", b.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", fmt.Sprintf("seckill_dbcost_%d", os.Getpid())).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Error("dbcost's database is still there after drop")
	}
}
