package handler

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// fakeVerifier is a Turnstile/hCaptcha-style siteverify on loopback: it
// records each form it gets and answers {"success": token == "good"}, or
// 500 when down.
type fakeVerifier struct {
	mu    sync.Mutex
	forms []url.Values
	down  bool
}

func (f *fakeVerifier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
		http.Error(w, "want a form POST", http.StatusBadRequest)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.forms = append(f.forms, r.PostForm)
	down := f.down
	f.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"success": r.PostForm.Get("response") == "good"})
}

// The human check on join (issue 33): the service posts secret, token and
// the client's address to the verify URL; refuse mode answers a failed
// check 403 human_check_failed and a verifier that is down 503, neither
// taking a place; log mode admits both (and logs).
func TestJoinHumanCheck(t *testing.T) {
	t.Parallel()
	fv := &fakeVerifier{}
	srv := httptest.NewServer(fv)
	t.Cleanup(srv.Close)
	body := func(token string) string {
		if token == "" {
			return `{"user_id":"alice"}`
		}
		return fmt.Sprintf(`{"user_id":"alice","human":{"token":%q}}`, token)
	}
	for _, mode := range []string{"refuse", "log"} {
		rs := &joinCountingRooms{roomed: map[int64]bool{1: true}}
		h := newTestHandler(t, answeringShop(), Config{Rooms: rs,
			HumanCheck: NewHumanCheck(HumanCheckConfig{URL: srv.URL, Secret: "s3cret", Refuse: mode == "refuse"})})
		for _, tc := range []struct {
			name, token   string
			down          bool
			refuse, asLog int // want status in refuse mode, in log mode
			refuseCode    string
		}{
			{"good token", "good", false, 200, 200, ""},
			{"bad token", "bad", false, 403, 200, CodeHumanCheckFailed},
			{"no token", "", false, 403, 200, CodeHumanCheckFailed},
			{"verifier down", "good", true, 503, 200, CodeUnavailable},
		} {
			fv.mu.Lock()
			fv.down = tc.down
			fv.mu.Unlock()
			joins := len(rs.joins)
			a := call(h, "POST", "/api/v1/items/1/queue", body(tc.token), nil)
			want := tc.asLog
			if mode == "refuse" {
				want = tc.refuse
			}
			if a.status != want || (want != 200 && a.code() != tc.refuseCode) {
				t.Errorf("%s, %s: got %d %s, want %d %s", mode, tc.name, a.status, a.body, want, tc.refuseCode)
			}
			if joined := len(rs.joins) > joins; joined != (want == 200) {
				t.Errorf("%s, %s: joined %v, want %v", mode, tc.name, joined, want == 200)
			}
		}
	}
	fv.mu.Lock()
	defer fv.mu.Unlock()
	if len(fv.forms) == 0 {
		t.Fatal("the verifier was never asked")
	}
	if f := fv.forms[0]; f.Get("secret") != "s3cret" || f.Get("response") != "good" || f.Get("remoteip") != "192.0.2.1" {
		t.Errorf("the verifier got %v, want secret, response (the token) and remoteip (the client's address)", f)
	}
}
