// Metrics: the RAG-cache workload under load, with its lock figures served
// at /metrics by a lockprom.Collector, so that
// `curl localhost:2112/metrics | grep agentlock_` shows them live.
//
// Run it from extra/lockprom with `go run ./examples/metrics` (an in-process
// Redis is started), or against your own server with
// `REDIS_ADDR=localhost:6379 go run ./examples/metrics`. Flags: -addr (where
// to serve, default 127.0.0.1:2112), -workers, -duration (0: until
// interrupted), -chaos (now and then delete a held lock's key, as an
// operator or an expiry would, so that losses show). It prints the address
// it serves on, and exits 1 if a cached answer is ever built twice at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/extra/lockprom"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:2112", "address to serve /metrics on")
	workers := flag.Int("workers", 32, "concurrent requests")
	queries := flag.Int("queries", 8, "distinct queries (fewer: more contention)")
	duration := flag.Duration("duration", 0, "how long to run; 0: until interrupted")
	chaos := flag.Bool("chaos", true, "now and then delete a held lock's key, so that losses show")
	flag.Parse()
	if err := run(*addr, *workers, *queries, *duration, *chaos); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(addr string, workers, queries int, duration time.Duration, chaos bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	rdb, closeRedis, err := dial()
	if err != nil {
		return err
	}
	defer closeRedis()

	col := lockprom.NewCollector(lockprom.WithKeyGroup(lockprom.PrefixGroup, 0))
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	fmt.Printf("serving http://%s/metrics\n", ln.Addr())

	// A short TTL, so that the pipeline's holds are renewed a few times.
	locks := lock.NewClient(rdb, lock.WithObserver(col), lock.WithTTL(300*time.Millisecond),
		lock.WithWaitTimeout(500*time.Millisecond))
	defer locks.Close()

	w := &workload{rdb: rdb, locks: locks, building: map[string]bool{}}
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() { w.requests(ctx, i, queries) })
	}
	wg.Go(func() { w.invalidate(ctx, queries) })
	if chaos {
		wg.Go(func() { w.chaos(ctx) })
	}
	wg.Wait()
	fmt.Printf("%d answers built, %d served from the cache\n", w.built.Load(), w.hits.Load())
	return w.err()
}

// dial returns a client of REDIS_ADDR, or of an in-process miniredis.
func dial() (*redis.Client, func(), error) {
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		rdb := redis.NewClient(&redis.Options{Addr: a})
		return rdb, func() { rdb.Close() }, nil
	}
	m, err := miniredis.Run()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return rdb, func() { rdb.Close(); m.Close() }, nil
}

// workload is the RAG cache: requests for a few queries, each answer built
// under the query's lock when it is not cached.
type workload struct {
	rdb   *redis.Client
	locks *lock.Client

	mu       sync.Mutex
	building map[string]bool // answers being built now, to catch a double build
	twice    error

	built, hits atomic.Int64
	held        sync.Map // key → struct{}: locks held now, for chaos
}

func (w *workload) requests(ctx context.Context, id, queries int) {
	r := rand.New(rand.NewPCG(uint64(id), 1))
	for ctx.Err() == nil {
		q := "rag:q" + strconv.Itoa(r.IntN(queries))
		err := w.answer(ctx, q, time.Duration(20+r.IntN(100))*time.Millisecond)
		if err != nil && ctx.Err() == nil && !errors.Is(err, lock.ErrNotAcquired) && !errors.Is(err, lock.ErrLockLost) {
			log.Printf("answer %s: %v", q, err)
		}
		time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond) // think time between requests
	}
}

// answer serves q from the cache, or builds it under q's lock, double
// checking the cache once the lock is held.
func (w *workload) answer(ctx context.Context, q string, cost time.Duration) error {
	if err := w.rdb.Get(ctx, "cache:"+q).Err(); !errors.Is(err, redis.Nil) {
		if err == nil {
			w.hits.Add(1)
		}
		return err
	}
	return w.locks.WithLock(ctx, q, func(ctx context.Context) error {
		if err := w.rdb.Get(ctx, "cache:"+q).Err(); !errors.Is(err, redis.Nil) {
			return err
		}
		w.enter(q)
		defer w.leave(q)
		select { // retrieval, reranking, a model call
		case <-time.After(cost):
		case <-ctx.Done():
			return context.Cause(ctx) // lost: stop, store nothing
		}
		w.built.Add(1)
		return w.rdb.Set(ctx, "cache:"+q, "answer", time.Minute).Err()
	})
}

func (w *workload) enter(q string) {
	w.held.Store(q, struct{}{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.building[q] && w.twice == nil {
		w.twice = fmt.Errorf("answer to %s built twice at once", q)
	}
	w.building[q] = true
}

func (w *workload) leave(q string) {
	w.held.Delete(q)
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.building, q)
}

func (w *workload) err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.twice
}

// invalidate drops a cached answer now and then, as new documents would,
// so that answers keep being rebuilt.
func (w *workload) invalidate(ctx context.Context, queries int) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.rdb.Del(ctx, "cache:rag:q"+strconv.Itoa(i%queries))
		}
	}
}

// chaos deletes a held lock's key every few seconds: its holder's renewal
// finds it gone, the hold is lost, and the build stops.
func (w *workload) chaos(ctx context.Context) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.held.Range(func(k, _ any) bool {
				w.rdb.Del(ctx, "lock:{"+k.(string)+"}")
				return false
			})
		}
	}
}
