package locktest

import (
	"context"
	"net"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/agentlock/lock"
)

// prefixOf returns the key prefix a lock.Client built with opts applies:
// it asks locks (built with those opts over a client carrying the probe
// hook) for one attempt on a probe key, which the hook records and fails
// before anything is sent. Options are opaque functions, so the attempt is
// how to read them; it leaves no trace in Redis.
func prefixOf(locks *lock.Client) (string, error) {
	var k string
	ctx := context.WithValue(context.Background(), probeKey{}, &k)
	_, err := locks.NewLock("locktest").TryAcquire(ctx)
	if k == "" {
		return "", err // invalid options: lock.ErrInvalid
	}
	return k[:strings.IndexByte(k, '{')], nil
}

// probe is a go-redis hook that sends nothing: it records the first lock key
// a command names, in the *string a probe context carries, and fails the
// command. Commands without that context pass through. See prefixOf.
type probe struct{}

type probeKey struct{}

// errProbe is what a probed command fails with; it never reaches a caller
// of this package.
var errProbe = &net.OpError{Op: "probe", Net: "tcp", Err: errProbeCause{}}

type errProbeCause struct{}

func (errProbeCause) Error() string { return "locktest: probe, not sent" }

func (probe) DialHook(next redis.DialHook) redis.DialHook { return next }

func (probe) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if out, ok := ctx.Value(probeKey{}).(*string); ok {
			record(out, cmd)
			cmd.SetErr(errProbe)
			return errProbe
		}
		return next(ctx, cmd)
	}
}

func (probe) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if out, ok := ctx.Value(probeKey{}).(*string); ok {
			for _, cmd := range cmds {
				record(out, cmd)
				cmd.SetErr(errProbe)
			}
			return errProbe
		}
		return next(ctx, cmds)
	}
}

// record stores in out the first lock key cmd names: an EVAL's or
// EVALSHA's first key, or another command's first argument.
func record(out *string, cmd redis.Cmder) {
	if *out != "" {
		return
	}
	args := cmd.Args()
	i := 1
	switch strings.ToLower(cmd.Name()) {
	case "eval", "evalsha":
		i = 3
	}
	if i < len(args) {
		if k, ok := args[i].(string); ok && lockKey(k) {
			*out = k
		}
	}
}
