# Developer entry points. CI runs .ci/run, which starts the services and
# then runs `make lint test fuzz FUZZTIME=3000x`: the two cannot drift.
.PHONY: run test suite drill lint bench loadtest fuzz

# A binary built with -race sleeps atexit_sleep_ms (1 s by default) when it
# exits, so that a goroutine still running may report a race first: about
# a second per test binary, and per service process a drill stops. Nothing
# here needs it: a race makes the test during which it is reported fail,
# the packages with goroutines of their own check with goleak that none
# outlives its tests, and a race found at exit still exits 66. Set GORACE
# yourself to keep the runtime's default.
export GORACE ?= atexit_sleep_ms=0

run:
	go run ./cmd/seckill

# The README's test command: the deterministic suite, then the drills,
# each with its time.
test:
	@start=$$(date +%s); rc=0; $(MAKE) --no-print-directory suite || rc=$$?; \
	  echo "== suite took $$(( $$(date +%s) - start )) s (target: 180 s)"; exit $$rc
	@start=$$(date +%s); rc=0; $(MAKE) --no-print-directory drill || rc=$$?; \
	  echo "== drills took $$(( $$(date +%s) - start )) s"; exit $$rc

# The deterministic tests: no test depends on the machine's speed.
suite:
	go test -race -count=1 ./...

# The drills: fault tests that bound a latency (a stalled Redis or database
# answers 503 within its timeout), behind the drill build tag so the
# parallel suite never runs them. One package at a time (-p 1), after the
# suite, on an otherwise idle machine; a drill's cases that each wait on
# backends of their own run as parallel subtests (-parallel 12).
drill:
	go test -race -count=1 -p 1 -parallel 12 -tags drill -run Drill ./...

lint:
	@unformatted="$$(gofmt -l $$(git ls-files '*.go'))"; \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags faultinject ./internal/app/ ./internal/faulttest/
	go vet -tags drill ./internal/app/ ./internal/faulttest/ ./internal/room/
	go tool -modfile=tools/go.mod staticcheck ./...

bench:
	go test -run '^$$' -bench . -benchmem ./internal/...

# Needs a running service (make run) and the harness in loadtest/.
loadtest:
	@if [ -d loadtest ]; then go run ./loadtest $(ARGS); else echo "no loadtest/ harness in this tree"; exit 1; fi

# A count, not a duration: Go 1.26's fuzz coordinator can fail a target
# with a bare "context deadline exceeded" when a duration runs out while a
# worker is busy (golang/go#75804, fixed in Go 1.27); a count has no deadline.
FUZZTIME ?= 5000x
fuzz:
	go test -run '^$$' -fuzz '^FuzzOrder$$' -fuzztime $(FUZZTIME) ./internal/app
	go test -run '^$$' -fuzz '^FuzzAdmin$$' -fuzztime $(FUZZTIME) ./internal/app
