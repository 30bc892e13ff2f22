package migrations_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/exitsleep"
)

// The migrations' tests start from empty databases: the other packages'
// start with the schema (testenv's schema.go).
func TestMain(m *testing.M) {
	exitsleep.Skip() // first: it starts the binary again
	testenv.EmptyDatabases()
	os.Exit(m.Run())
}
