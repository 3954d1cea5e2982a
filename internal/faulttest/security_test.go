package faulttest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	lock "github.com/agentlock/lock"
	"github.com/agentlock/lock/internal/luascripts"
	"github.com/agentlock/lock/internal/redistest"
)

// uuidV4 matches a random (version 4, RFC 4122 variant) UUID.
var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestSecurity_tokens checks that every hold gets a fresh random UUID v4
// token (the core draws them with google/uuid's NewRandom, which reads
// crypto/rand); no two of 2000 holds share one.
func TestSecurity_tokens(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	locks := lock.NewClient(s.Client(t), lock.WithFencing(false))
	defer locks.Close()
	ctx := context.Background()
	seen := map[string]bool{}
	l := locks.NewLock("tokens")
	for range 2000 {
		if err := l.Acquire(ctx); err != nil {
			t.Fatalf("Acquire() error = %v", err)
		}
		tok := l.Token()
		if !uuidV4.MatchString(tok) {
			t.Fatalf("token %q is not a random UUID v4", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q issued twice", tok)
		}
		seen[tok] = true
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release() error = %v", err)
		}
	}
}

// TestSecurity_noUserDataInScripts locks keys built to break out of a
// script if they were ever spliced into its text, and checks that they
// work as plain keys and that the server's script cache never grows past
// the library's fixed scripts.
func TestSecurity_noUserDataInScripts(t *testing.T) {
	s := redistest.Start(t, redistest.Config{})
	rdb := s.Client(t)
	ctx := context.Background()
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	locks := lock.NewClient(rdb)
	defer locks.Close()
	keys := []string{
		"plain",
		`"]] redis.call('FLUSHALL') --`,
		"') return 1 --",
		"x\nredis.call('SET','pwned','1')",
		"nul\x00byte",
		"{inner}tag",
		"]]..redis.call('DEL', KEYS[1])..[[",
		strings.Repeat("k", 4096),
		"ünïcödé ✓",
	}
	for _, key := range keys {
		for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
			l := locks.NewLock(key, lock.WithReleaseMode(mode))
			if err := l.Acquire(ctx); err != nil {
				t.Fatalf("Acquire(%q) error = %v", key, err)
			}
			if v, err := rdb.Get(ctx, lockKey(key)).Result(); err != nil || v != l.Token() {
				t.Errorf("key %q: Redis has %q, %v; want the token at %q", key, v, err, lockKey(key))
			}
			if err := l.Extend(ctx, time.Minute); err != nil {
				t.Errorf("Extend(%q) error = %v", key, err)
			}
			if err := l.Release(ctx); err != nil {
				t.Errorf("Release(%q) error = %v", key, err)
			}
		}
	}
	if n, _ := rdb.Exists(ctx, "pwned").Result(); n != 0 {
		t.Errorf("a key escaped into a script: 'pwned' exists")
	}
	cached := scriptsCached(ctx, t, rdb)
	if cached > len(luascripts.All) {
		t.Errorf("%d scripts cached after %d distinct keys, want at most the library's %d", cached, len(keys), len(luascripts.All))
	}
	figure(t, "no_user_data_in_scripts", "keys", len(keys), "scripts_cached", cached, "library_scripts", len(luascripts.All))
}

// scriptsCached reads number_of_cached_scripts from INFO memory.
func scriptsCached(ctx context.Context, t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "number_of_cached_scripts:"); ok {
			var n int
			fmt.Sscan(v, &n)
			return n
		}
	}
	t.Fatalf("INFO memory has no number_of_cached_scripts")
	return 0
}

// TestSecurity_nonOwnerCannotReleaseOrExtend tries to release, extend and
// read the TTL of someone else's hold with a stale handle (its hold expired
// and was taken over), with a handle that never acquired, and with the raw
// scripts and a forged token; in both modes. None may touch the holder's
// key or TTL.
func TestSecurity_nonOwnerCannotReleaseOrExtend(t *testing.T) {
	for _, mode := range []lock.ReleaseMode{lock.ReleaseScript, lock.ReleaseWatch} {
		t.Run(mode.String(), func(t *testing.T) {
			s := redistest.Start(t, redistest.Config{})
			rdb := s.Client(t)
			ctx := context.Background()
			locks := lock.NewClient(rdb, lock.WithReleaseMode(mode))
			defer locks.Close()
			key := "owned"

			stale := locks.NewLock(key, lock.WithTTL(200*time.Millisecond), lock.WithWatchdog(false))
			if err := stale.Acquire(ctx); err != nil {
				t.Fatal(err)
			}
			<-stale.Lost()
			owner := locks.NewLock(key, lock.WithTTL(time.Minute))
			if err := owner.Acquire(ctx); err != nil {
				t.Fatalf("owner Acquire() error = %v", err)
			}
			before, _ := rdb.PTTL(ctx, lockKey(key)).Result()

			never := locks.NewLock(key)
			for name, l := range map[string]*lock.Lock{"stale": stale, "never acquired": never} {
				if err := l.Release(ctx); !errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("%s handle: Release() error = %v, want ErrNotHeld", name, err)
				}
				if err := l.Extend(ctx, time.Hour); !errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("%s handle: Extend() error = %v, want ErrNotHeld", name, err)
				}
				if _, err := l.TTL(ctx); !errors.Is(err, lock.ErrNotHeld) {
					t.Errorf("%s handle: TTL() error = %v, want ErrNotHeld", name, err)
				}
			}
			keys := []string{lockKey(key), lockKey(key) + ":notify"}
			for _, forged := range []string{"", "forged", stale.Token(), strings.ToUpper(owner.Token())} {
				if n, err := luascripts.Release.Run(ctx, rdb, keys, forged, "0").Int64(); err != nil || n != -1 {
					t.Errorf("release script with token %q = %d, %v; want -1", forged, n, err)
				}
				if n, err := luascripts.Extend.Run(ctx, rdb, keys[:1], forged, 3600000, "0").Int64(); err != nil || n != -1 {
					t.Errorf("extend script with token %q = %d, %v; want -1", forged, n, err)
				}
				if n, err := luascripts.Release.Run(ctx, rdb, keys, forged, "1").Int64(); err != nil || n != -1 {
					t.Errorf("re-entrant release script with owner %q = %d, %v; want -1", forged, n, err)
				}
			}
			v, err := rdb.Get(ctx, lockKey(key)).Result()
			if err != nil || v != owner.Token() {
				t.Errorf("after the attempts Redis has %q, %v; want the owner's token", v, err)
			}
			after, _ := rdb.PTTL(ctx, lockKey(key)).Result()
			if after > before {
				t.Errorf("PTTL grew from %v to %v: someone else extended the owner's hold", before, after)
			}
			select {
			case <-owner.Lost():
				t.Errorf("owner's hold reported lost: %v", owner.LostErr())
			default:
			}
			if err := owner.Release(ctx); err != nil {
				t.Errorf("owner Release() error = %v", err)
			}
		})
	}
}

// TestSecurity_TLS runs the lock, wake-ups included, over a TLS-only
// redis-server with a self-made CA, and checks that a plain-text client is
// refused.
func TestSecurity_TLS(t *testing.T) {
	s, _ := redistest.StartTLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := s.Options()
	plain.TLSConfig = nil
	plain.MaxRetries = -1
	pc := redis.NewClient(plain)
	defer pc.Close()
	if err := pc.Ping(ctx).Err(); err == nil {
		t.Fatalf("plain-text PING succeeded on a TLS-only server")
	}
	rdb := s.Client(t)
	locks := lock.NewClient(rdb, lock.WithTTL(2*time.Second))
	defer locks.Close()
	others := lock.NewClient(rdb, lock.WithTTL(2*time.Second))
	defer others.Close()
	exerciseVerbs(ctx, t, locks, others, lock.ReleaseScript)
}
