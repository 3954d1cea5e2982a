package hooktest_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock/internal/hooktest"
)

func isSet(cmd redis.Cmder) bool { return cmd.Name() == "set" }

// start sends SET key in the background and returns its outcome's channel.
func start(rdb *redis.Client, key string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- rdb.Set(context.Background(), key, "v", 0).Err() }()
	return done
}

func newRDB(t *testing.T) (*miniredis.Miniredis, *redis.Client) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return m, rdb
}

func wantPending(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("%s returned (%v) while held", what, err)
	default:
	}
}

// TestGate_holdsNthBeforeOrAfter: with Nth 2, the first SET passes and the
// second is held: before it is sent (the key is absent) or after Redis ran
// it (the key is there); Release lets it and later calls through.
func TestGate_holdsNthBeforeOrAfter(t *testing.T) {
	for _, after := range []bool{false, true} {
		m, rdb := newRDB(t)
		g := hooktest.New(t, hooktest.Config{On: hooktest.Calls, After: after, Match: isSet, Nth: 2, Armed: true})
		rdb.AddHook(g)
		if err := <-start(rdb, "a"); err != nil {
			t.Fatalf("first SET = %v", err)
		}
		done := start(rdb, "b")
		<-g.Held()
		wantPending(t, done, "the second SET")
		if m.Exists("b") != after {
			t.Fatalf("after=%v: key b exists = %v while its SET is held", after, m.Exists("b"))
		}
		if n := g.Waiting(); n != 1 {
			t.Fatalf("Waiting() = %d, want 1", n)
		}
		g.Release()
		if err := <-done; err != nil {
			t.Fatalf("held SET = %v", err)
		}
		if err := <-start(rdb, "c"); err != nil {
			t.Fatalf("SET after Release = %v", err)
		}
		if g.Holds() != 1 || g.Waiting() != 0 || g.Matched() != 3 {
			t.Fatalf("Holds(), Waiting(), Matched() = %d, %d, %d; want 1, 0, 3", g.Holds(), g.Waiting(), g.Matched())
		}
	}
}

// TestGate_armAfterRelease: a Gate armed again after a Release holds
// again, and Held reports the new hold; calls it does not match pass.
func TestGate_armAfterRelease(t *testing.T) {
	_, rdb := newRDB(t)
	g := hooktest.New(t, hooktest.Config{Match: isSet})
	rdb.AddHook(g)
	for round := range 2 {
		g.Arm()
		if err := rdb.Get(context.Background(), "x").Err(); err != redis.Nil {
			t.Fatalf("GET with the gate armed = %v, want redis.Nil", err)
		}
		done := start(rdb, "k")
		<-g.Held()
		wantPending(t, done, "SET")
		g.Release()
		if err := <-done; err != nil {
			t.Fatalf("round %d: SET = %v", round, err)
		}
	}
}

// TestGate_dialsAndPipelines: a Gate on Dials holds a new connection until
// Release; one on Pipelines holds a pipeline carrying a matching command.
func TestGate_dialsAndPipelines(t *testing.T) {
	ctx := context.Background()
	_, rdb := newRDB(t)
	dials := hooktest.New(t, hooktest.Config{On: hooktest.Dials, Armed: true})
	pipes := hooktest.New(t, hooktest.Config{On: hooktest.Pipelines, Match: isSet, Armed: true})
	rdb.AddHook(dials)
	rdb.AddHook(pipes)
	done := start(rdb, "k") // the pool is empty: the call dials
	<-dials.Held()
	wantPending(t, done, "SET on a held dial")
	dials.Release()
	if err := <-done; err != nil {
		t.Fatalf("SET = %v", err)
	}
	piped := make(chan error, 1)
	go func() {
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, "p", "v", time.Minute)
			return nil
		})
		piped <- err
	}()
	<-pipes.Held()
	wantPending(t, piped, "the pipeline")
	pipes.Release()
	if err := <-piped; err != nil {
		t.Fatalf("pipeline = %v", err)
	}
}
