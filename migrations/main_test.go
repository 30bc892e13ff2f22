package migrations_test

import (
	"os"
	"testing"

	"github.com/seckill/seckill/internal/testenv"
)

// The migrations' tests start from empty databases: the other packages'
// start with the schema (testenv's schema.go).
func TestMain(m *testing.M) {
	testenv.EmptyDatabases()
	os.Exit(m.Run())
}
