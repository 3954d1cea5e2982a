// Session: concurrent workers append to one chat session under a lock.
//
// Run it with `go run ./examples/session` (an in-process Redis is started),
// or against your own server with `REDIS_ADDR=localhost:6379 go run ./examples/session`.
//
// Each worker reads the session's history, waits for a (simulated) model
// call, and writes the history back with its message appended: the
// read-modify-write every agent back end does per turn. Under the lock no
// message is lost; the program then runs the same workers without the lock
// and counts what they lose. It exits 1 if the locked run loses anything.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/agentlock/lock"
	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

const (
	workers = 8
	appends = 25
	session = "session:demo"
	history = "session:demo:history" // the session's state: a JSON list of messages
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "session:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := os.Getenv("REDIS_ADDR")
	if addr == "" {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks := lock.NewClient(rdb)
	defer locks.Close()
	ctx := context.Background()

	fmt.Printf("%d workers × %d appends to %q, each a read-modify-write of its history\n", workers, appends, session)
	for _, locked := range []bool{true, false} {
		start := time.Now()
		kept, err := appendAll(ctx, rdb, locks, locked)
		if err != nil {
			return err
		}
		how := "with the lock:   "
		if !locked {
			how = "without the lock:"
		}
		fmt.Printf("%s %3d/%d messages kept, %d lost (%v)\n",
			how, kept, workers*appends, workers*appends-kept, time.Since(start).Round(time.Millisecond))
		if locked && kept != workers*appends {
			return errors.New("the locked run lost messages")
		}
	}
	return nil
}

// appendAll starts with an empty history, lets every worker append its
// messages, under the lock if locked, and returns the history's length.
func appendAll(ctx context.Context, rdb *redis.Client, locks *lock.Client, locked bool) (int, error) {
	if err := rdb.Del(ctx, history).Err(); err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range appends {
				msg := fmt.Sprintf("worker %d, message %d", w, i)
				var err error
				if locked {
					err = locks.WithLock(ctx, session, func(ctx context.Context) error {
						return appendMessage(ctx, rdb, msg) // ctx ends if the lock is lost
					})
				} else {
					err = appendMessage(ctx, rdb, msg) // races the other workers
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	msgs, err := load(ctx, rdb)
	return len(msgs), err
}

// appendMessage is one turn: read the history, call the model, write back.
func appendMessage(ctx context.Context, rdb *redis.Client, msg string) error {
	msgs, err := load(ctx, rdb)
	if err != nil {
		return err
	}
	time.Sleep(time.Millisecond) // stand-in for the model call
	b, err := json.Marshal(append(msgs, msg))
	if err != nil {
		return err
	}
	return rdb.Set(ctx, history, b, time.Hour).Err()
}

func load(ctx context.Context, rdb *redis.Client) ([]string, error) {
	b, err := rdb.Get(ctx, history).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []string
	return msgs, json.Unmarshal(b, &msgs)
}
