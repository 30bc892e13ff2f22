package main

import (
	"context"
	"errors"
	"io"
)

type embeddedOptions struct {
	MySQLDSN  string // empty = embedded SQLite in a temp dir
	RedisURL  string // empty = in-process miniredis
	KeyPrefix string
	Log       io.Writer
}

type embeddedService struct {
	BaseURL    string
	AdminToken string
	SQLitePath string // set when the service uses the embedded SQLite
	Describe   string
	close      func() error
}

func (s *embeddedService) Close() error { return s.close() }

// startEmbedded starts the service in-process.
// TODO(loadtest): wire internal/app once it is merged from main; until then
// -embedded reports that it is unavailable.
func startEmbedded(ctx context.Context, opts embeddedOptions) (*embeddedService, error) {
	return nil, errors.New("not available yet: internal/app has not been merged into this branch")
}
