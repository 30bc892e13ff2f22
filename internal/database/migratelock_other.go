//go:build !unix

package database

import "sync"

var migrateMu sync.Mutex

// lockFile serializes migrations within this process only: elsewhere than
// on unix, two processes must not open a new SQLite file at once.
func lockFile(string) (func(), error) {
	migrateMu.Lock()
	return migrateMu.Unlock, nil
}
