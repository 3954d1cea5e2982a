package lock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/redistest"
)

// TestClient_Close_holdsLostByDeadlineWhileARenewalHangs: Close waits for
// the renewal calls in flight, which go-redis gives up only at its read or
// dial timeout (with the default options and one master of a cluster
// stopped, Close took 4.7s). Meanwhile the holds on the healthy masters are
// no longer renewed; Close's contract is that their Lost() closes at their
// safety deadlines, before Redis lets their keys go. Here one master is
// SIGSTOPped and the renewal call to it is kept from returning until the
// test ends; another client then takes each healthy master's key as soon as
// it expires, and the first holder's Lost() must already be closed.
func TestClient_Close_holdsLostByDeadlineWhileARenewalHangs(t *testing.T) {
	const ttl = 1500 * time.Millisecond
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, 0, "--cluster-require-full-coverage", "no")
	rdb := redis.NewClusterClient(cl.ClusterOptions())
	t.Cleanup(func() { rdb.Close() })
	c := lock.NewClient(rdb)

	// One hold on each master; the first one's master is stopped.
	var holds []*lock.Lock
	var masters []*redistest.Server
	for srv, ls := range holdsPerMaster(t, cl, c, 1, ttl) {
		holds, masters = append(holds, ls[0]), append(masters, srv)
	}
	stalled := masters[0]
	// Another client, its slot map and command table loaded before the
	// stop, so that it reaches the healthy masters at once.
	other, orb := newClient(t, cl.Client(t)), cl.Client(t)
	for _, l := range holds {
		if ok, err := other.NewLock(l.Key()).TryAcquire(ctx); ok || err != nil {
			t.Fatalf("other client's TryAcquire() = %v, %v, want false", ok, err)
		}
	}
	hang := &hangPipeline{key: lockKey(holds[0].Key()), out: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(hang)
	must(t, "SIGSTOP", stalled.Pause())
	closing, closed := false, make(chan struct{})
	t.Cleanup(func() {
		_ = stalled.Resume()
		hang.open()
		if closing {
			<-closed
		} else {
			c.Close()
		}
	})
	select {
	case <-hang.out:
	case <-time.After(ttl):
		t.Fatalf("no renewal to the stopped master within the TTL %v", ttl)
	}
	closing = true
	go func() {
		defer close(closed)
		c.Close()
	}()

	for i, l := range holds[1:] {
		takeOver(t, other, orb, l, 10*time.Second,
			fmt.Sprintf("Close() is waiting for the renewal call to stopped master %s; hold on healthy master %s",
				stalled.Addr(), masters[i+1].Addr()))
	}
}

// hangPipeline is a go-redis hook that keeps the first pipeline carrying key
// from returning until open is called, whatever its context says, as
// go-redis does until its read or dial timeout with a server that does not
// answer.
type hangPipeline struct {
	key     string
	out     chan struct{} // closed when that pipeline is sent
	release chan struct{}
	once    sync.Once
	hung    sync.Once
}

func (h *hangPipeline) open() { h.once.Do(func() { close(h.release) }) }

func (h *hangPipeline) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hangPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *hangPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		hang := false
		for _, cmd := range cmds {
			if a := cmd.Args(); len(a) > 3 && fmt.Sprint(a[3]) == h.key {
				h.hung.Do(func() { hang = true })
				break
			}
		}
		if !hang {
			return next(ctx, cmds)
		}
		close(h.out)
		err := next(ctx, cmds)
		<-h.release
		return err
	}
}
