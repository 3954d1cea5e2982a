package luascripts

import (
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// Boxed is a script as a Prebuilt call sends it: its SHA1 and its source,
// each converted to an interface once (a conversion allocates).
type Boxed struct{ sha, src any }

func box(s *redis.Script, src string) *Boxed { return &Boxed{sha: s.Hash(), src: src} }

// The scripts redlock sends to every node, boxed.
var (
	AcquireBoxed    = box(Acquire, acquireSrc)
	ReleaseBoxed    = box(Release, releaseSrc)
	ExtendBoxed     = box(Extend, extendSrc)
	FenceRaiseBoxed = box(FenceRaise, fenceRaiseSrc)
	UndoBoxed       = box(Undo, undoSrc)
)

// Prebuilt is one script call whose arguments — "evalsha", the SHA1, the number
// of keys, the keys, the arguments — are built once, in one slice, and
// shared by every command that sends it: redlock sends the same call to
// every node, each node's command costing one IntCmd and nothing more.
// Every script of ours replies with one integer, which an IntCmd keeps
// without boxing it.
type Prebuilt struct {
	s    *Boxed
	args []any
	once bool
}

// NewPrebuilt builds a call of s with keys and args. With once, each of its
// commands is sent once (see OnceCmd): for Release.
func NewPrebuilt(s *Boxed, once bool, keys []string, args ...any) Prebuilt {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", s.sha, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return Prebuilt{s: s, args: append(a, args...), once: once}
}

// Send sends the call to rdb as its own command and returns the command,
// carrying the reply or the error. A server that lacks the script (NOSCRIPT:
// it did not run it) gets the whole script by EVAL, in a second command.
// The call's arguments are only read, so several Sends may run at once.
func (c *Prebuilt) Send(ctx context.Context, rdb Processor) *redis.IntCmd {
	cmd := c.send(ctx, rdb, c.args)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		a := slices.Clone(c.args)
		a[0], a[1] = "eval", c.s.src
		cmd = c.send(ctx, rdb, a)
	}
	return cmd
}

func (c *Prebuilt) send(ctx context.Context, rdb Processor, args []any) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, args...)
	if c.once {
		_ = rdb.Process(ctx, &once{cmd}) // the error is in cmd
	} else {
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}

// once is OnceCmd without room for arguments: a Prebuilt's arguments are built
// elsewhere.
type once struct{ redis.Cmder }

// NoRetry tells go-redis not to resend the command.
func (*once) NoRetry() bool { return true }
