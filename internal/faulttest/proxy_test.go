package faulttest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	lock "github.com/agentlock/lock"
)

// startProxy runs an in-process toxiproxy proxy from a free loopback port to
// upstream until t ends.
func startProxy(t testing.TB, upstream string) *toxiproxy.Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy start: %v", err)
	}
	t.Cleanup(p.Stop)
	return p
}

// addToxic adds a toxic given as toxiproxy's JSON, e.g.
// {"type":"latency","stream":"downstream","attributes":{"latency":800}}.
func addToxic(t testing.TB, p *toxiproxy.Proxy, name, typ, stream string, attrs string) {
	t.Helper()
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
		t.Fatalf("add toxic %s: %v", js, err)
	}
}

func removeToxic(t testing.TB, p *toxiproxy.Proxy, name string) {
	t.Helper()
	if err := p.Toxics.RemoveToxic(context.Background(), name); err != nil {
		t.Fatalf("remove toxic %s: %v", name, err)
	}
}

// errClass names the class of an error a lock call returned. Every error
// the suite sees must fall in one of these; "other" fails the test.
func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, lock.ErrLockLost):
		return "lost"
	case errors.Is(err, lock.ErrNotHeld):
		return "not_held"
	case errors.Is(err, lock.ErrNotAcquired) && isCtx(err):
		return "not_acquired_ctx"
	case errors.Is(err, lock.ErrNotAcquired) && isNetwork(err):
		return "not_acquired_network"
	case errors.Is(err, lock.ErrNotAcquired):
		return "not_acquired"
	case isCtx(err):
		return "ctx"
	case isNetwork(err):
		return "network"
	}
	return "other"
}

func isCtx(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// isNetwork reports the errors a broken or slow connection gives.
func isNetwork(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
