// Command lockctl shows and frees agentlock locks in Redis, for operators.
//
// Usage:
//
//	lockctl [flags] COMMAND [flags] [args]
//
// Run "lockctl -help" for the commands, flags and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	lock "github.com/agentlock/lock"
)

// Exit codes.
const (
	exitOK       = 0 // done
	exitNotFound = 1 // the key is not held / nothing to release
	exitUsage    = 2 // bad usage, bad input or a connection/Redis error
)

const usageText = `lockctl shows and frees agentlock locks in Redis.

Usage:
  lockctl [flags] COMMAND [flags] [args]

Commands:
  list [PATTERN]          every lock whose key matches PATTERN (a Redis glob, default *)
  inspect KEY             the kind, holders, waiters and fence of one lock
  release --force KEY     free KEY whoever holds it (refused without --force);
                          --token T removes only the hold with token T
  watch                   follow the audit stream (WithAudit), like tail -f, until Ctrl-C;
                          --stream NAME (default PREFIX+"audit"), --from ID (default $: new entries)
  fences                  count the fence counters (P{K}:fence) and the library's keys
                          without a TTL, with SCAN on every master

WAITERS (list, inspect): a fair lock's queued Acquires; for the other kinds, the
  processes (lock Clients) subscribed to the key's notify channel, waiting for its
  release: one per process, however many of its Acquires wait (a process may
  stay subscribed a while after its last waiter got the lock).

Flags (before or after COMMAND):
  -addr ADDR       Redis address, host:port or redis://[user:pass@]host:port/db;
                   default $REDIS_ADDR, else 127.0.0.1:6379
  -prefix P        the locks' key prefix (default "lock:")
  --cluster SEEDS  a Redis Cluster: comma-separated seed addresses (or "1" to use -addr as the seed)
  --json           machine output: one JSON object per line (list, watch) or one object

Exit codes:
  0  ok
  1  not found or not held (inspect or release of a free key, --token of no hold)
  2  usage error, bad input, or a connection or Redis error
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// globals are the flags every command takes.
type globals struct {
	addr    string
	prefix  string
	cluster string
	json    bool
	// noRetry makes the Redis client report a failed call at once rather
	// than retry it: watch retries itself, and says so.
	noRetry bool
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "Redis address (host:port or redis:// URL)")
	fs.StringVar(&g.prefix, "prefix", g.prefix, "the locks' key prefix")
	fs.StringVar(&g.cluster, "cluster", g.cluster, "Redis Cluster seed addresses, comma-separated")
	fs.BoolVar(&g.json, "json", g.json, "JSON output")
}

// usageError is bad usage: exit 2 with the message.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// errNotFound is a free key: exit 1.
var errNotFound = errors.New("not held")

// run runs lockctl with args and returns its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	g := &globals{addr: getenv("REDIS_ADDR"), prefix: lock.DefaultPrefix}
	if g.addr == "" {
		g.addr = "127.0.0.1:6379"
	}
	fs := flag.NewFlagSet("lockctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usageText) }
	g.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	cmd, rest := fs.Arg(0), fs.Args()[1:]
	c, ok := commands[cmd]
	if !ok {
		fmt.Fprintf(stderr, "lockctl: unknown command %q\n\n%s", cmd, usageText)
		return exitUsage
	}
	err := c(ctx, g, rest, stdout, stderr)
	return exitCode(err, stderr)
}

// exitCode prints err (if any) and maps it to an exit code.
func exitCode(err error, stderr io.Writer) int {
	var ue usageError
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "lockctl: %s\n", ue.msg)
		return exitUsage
	case errors.Is(err, errNotFound), errors.Is(err, lock.ErrNotHeld):
		fmt.Fprintf(stderr, "lockctl: %v\n", err)
		return exitNotFound
	default:
		fmt.Fprintf(stderr, "lockctl: %v\n", err)
		return exitUsage
	}
}

// command runs one subcommand.
type command func(ctx context.Context, g *globals, args []string, stdout, stderr io.Writer) error

var commands map[string]command

func init() {
	commands = map[string]command{
		"list":    cmdList,
		"inspect": cmdInspect,
		"release": cmdRelease,
		"watch":   cmdWatch,
		"fences":  cmdFences,
	}
}

// parse parses a subcommand's args into fs (with the global flags too),
// letting flags and positional arguments interleave, and returns the
// positional ones.
func parse(fs *flag.FlagSet, g *globals, args []string, stderr io.Writer) ([]string, error) {
	fs.SetOutput(stderr)
	g.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
		if fs.Arg(0) == "--" {
			pos = append(pos[:len(pos)-1], args...)
			return pos, nil
		}
	}
}

// wantArgs checks the number of positional arguments of cmd.
func wantArgs(cmd string, pos []string, min, max int, use string) error {
	if len(pos) < min || len(pos) > max {
		return usagef("usage: lockctl %s %s", cmd, use)
	}
	for _, p := range pos {
		if strings.TrimSpace(p) == "" {
			return usagef("usage: lockctl %s %s (empty argument)", cmd, use)
		}
	}
	return nil
}
