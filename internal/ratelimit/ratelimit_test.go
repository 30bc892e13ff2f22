package ratelimit_test

import (
	"testing"
	"time"

	"github.com/seckill/seckill/internal/ratelimit"
)

func TestParse(t *testing.T) {
	cases := []struct {
		in      string
		want    ratelimit.Limit
		wantErr bool
	}{
		{"0", ratelimit.Limit{}, false},
		{"", ratelimit.Limit{}, false},
		{"10/s", ratelimit.Limit{Rate: 10, Period: time.Second, Burst: 10}, false},
		{"600/m:20", ratelimit.Limit{Rate: 600, Period: time.Minute, Burst: 20}, false},
		{"100/h", ratelimit.Limit{Rate: 100, Period: time.Hour, Burst: 100}, false},
		{"ten/s", ratelimit.Limit{}, true},
		{"-1/s", ratelimit.Limit{}, true},
		{"5/d", ratelimit.Limit{}, true},
		{"5", ratelimit.Limit{}, true},
		{"5/s:0", ratelimit.Limit{}, true},
		{"5/s:x", ratelimit.Limit{}, true},
	}
	for _, tc := range cases {
		got, err := ratelimit.Parse(tc.in)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Parse(%q): got %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
		if err == nil {
			if back, _ := ratelimit.Parse(got.String()); back != got {
				t.Errorf("Parse(%q).String() = %q does not parse back: got %+v", tc.in, got.String(), back)
			}
		}
	}
}

func TestNilLimiterAdmits(t *testing.T) {
	var l *ratelimit.Limiter
	if wait, err := l.Allow(t.Context(), "k"); wait != 0 || err != nil {
		t.Errorf("nil limiter: got %v, %v; want 0, nil", wait, err)
	}
	if ratelimit.New(nil, "p:", ratelimit.Limit{}, nil) != nil {
		t.Errorf("New with an off limit: got a limiter, want nil")
	}
}
