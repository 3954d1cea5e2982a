package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// auditMaxLen caps the audit stream when release records a force-release.
const auditMaxLen = 100000

// watchBlock is how long one XREAD blocks before watch asks again.
const watchBlock = 5 * time.Second

// defaultStream is the audit stream lockctl reads when --stream is not
// given: the prefix followed by "audit" ("lock:audit"), beside the
// prefix's force channel (prefix + "force").
func defaultStream(g *globals) string { return g.prefix + "audit" }

// auditStream returns the stream release records to: the one named, else
// the default one when it exists; "" for none.
func auditStream(ctx context.Context, rdb redis.UniversalClient, g *globals, named string) string {
	if named != "" {
		return named
	}
	name := defaultStream(g)
	if n, err := rdb.Exists(ctx, name).Result(); err == nil && n == 1 {
		return name
	}
	return ""
}

// auditFields is the order watch prints an entry's fields in.
var auditFields = []string{"event", "key", "token", "fence", "owner", "host", "pid", "metadata", "reason", "time"}

// cmdWatch follows the audit stream until ctx ends.
func cmdWatch(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	stream := fs.String("stream", "", "the audit stream (default PREFIX+\"audit\")")
	from := fs.String("from", "$", "the entry ID to start after: $ for new entries only, 0 for the whole stream")
	pos, err := parse(fs, g, args, stderr)
	if err != nil {
		return err
	}
	if err := wantArgs("watch", pos, 0, 0, "[--stream NAME] [--from ID]"); err != nil {
		return err
	}
	if *stream == "" {
		*stream = defaultStream(g)
	}
	// A read that fails is not retried by go-redis (which would hide a
	// quick restart) but by run, which says so.
	g.noRetry = true
	rdb, err := connect(ctx, g)
	if err != nil {
		return err
	}
	// A blocked XREAD does not see ctx end: closing the client ends it.
	stop := context.AfterFunc(ctx, func() { _ = rdb.Close() })
	defer func() {
		if stop() {
			_ = rdb.Close()
		}
	}()
	last := *from
	if last == "$" {
		// Pin "$" to an ID, so a timed-out XREAD does not skip entries
		// added between two calls.
		last = "0-0"
		if xs, err := rdb.XRevRangeN(ctx, *stream, "+", "-", 1).Result(); err == nil && len(xs) == 1 {
			last = xs[0].ID
		} else if err != nil && ctx.Err() == nil {
			return err
		}
	}
	w := &watcher{rdb: rdb, stream: *stream, last: last, where: g.where(), json: g.json}
	return w.run(ctx, stdout, stderr)
}

// Backoff between two reads of a watch whose connection failed.
const (
	watchBackoffMin = 100 * time.Millisecond
	watchBackoffMax = 5 * time.Second
)

// watcher follows one audit stream.
type watcher struct {
	rdb    redis.UniversalClient
	stream string
	last   string // the last entry ID seen
	where  string
	json   bool
}

// run prints the entries after w.last until ctx ends. A failed read is
// retried with backoff from the last entry seen; one line on stderr says
// that the stream was interrupted, and one that it resumed. A Redis error
// reply ends it.
func (w *watcher) run(ctx context.Context, stdout, stderr io.Writer) error {
	var lost error
	backoff := watchBackoffMin
	for ctx.Err() == nil {
		res, err := w.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{w.stream, w.last}, Block: watchBlock, Count: 100}).Result()
		var reply redis.Error
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redis.Nil):
		case errors.As(err, &reply) && !transient(err):
			return err
		case err != nil:
			if lost == nil {
				fmt.Fprintf(stderr, "lockctl: watch: stream interrupted (%v); reconnecting to %s\n", err, w.where)
			}
			lost = err
			if !sleep(ctx, backoff) {
				return nil
			}
			backoff = min(2*backoff, watchBackoffMax)
			continue
		}
		if lost != nil {
			fmt.Fprintf(stderr, "lockctl: watch: reconnected to %s; resumed after entry %s\n", w.where, w.last)
			lost, backoff = nil, watchBackoffMin
		}
		if err := w.print(stdout, res); err != nil {
			return err
		}
	}
	return nil
}

// print prints the entries of res and remembers the last one's ID.
func (w *watcher) print(stdout io.Writer, res []redis.XStream) error {
	for _, s := range res {
		for _, m := range s.Messages {
			if err := printEntry(stdout, w.json, m); err != nil {
				return err
			}
			w.last = m.ID
		}
	}
	return nil
}

// transient reports whether err, a Redis error reply, is one a server
// gives while it starts or fails over, to be retried.
func transient(err error) bool {
	for _, p := range []string{"LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// sleep waits d, and reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// printEntry prints one audit entry, on one line.
func printEntry(w io.Writer, asJSON bool, m redis.XMessage) error {
	if asJSON {
		v := map[string]any{"id": m.ID}
		for k, x := range m.Values {
			v[k] = x
		}
		return writeJSON(w, v)
	}
	var b strings.Builder
	b.WriteString(m.ID)
	for _, f := range auditFields {
		x, ok := m.Values[f]
		if !ok || fmt.Sprint(x) == "" {
			continue
		}
		if f == "event" || f == "key" {
			fmt.Fprintf(&b, " %v", x)
			continue
		}
		fmt.Fprintf(&b, " %s=%v", f, x)
	}
	var extra []string
	for k := range m.Values {
		if !contains(auditFields, k) {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	for _, k := range extra {
		fmt.Fprintf(&b, " %s=%v", k, m.Values[k])
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
