//go:build drill

package app_test

import (
	"testing"
	"time"
)

// drillWebhookBound is how soon a webhook must get its 503 with the
// database stalled: SECKILL_DB_TIMEOUT (1 s) bounds its transaction, with
// the drills' slack for a loaded machine (internal/faulttest's
// drillDBBound).
const drillWebhookBound = webhookStallDBTimeout + 1500*time.Millisecond

// TestDrillWebhookDatabaseStalled: a stalled database answers the
// provider's webhook 503 within the DB timeout, not the request's.
func TestDrillWebhookDatabaseStalled(t *testing.T) {
	took := stalledWebhook(t)
	t.Logf("the webhook's 503 with the database stalled took %v (bound %v)", took.Round(time.Millisecond), drillWebhookBound)
	if took > drillWebhookBound {
		t.Fatalf("the 503 took %v, want at most %v", took, drillWebhookBound)
	}
}
